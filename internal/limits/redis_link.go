package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"petstore/internal/tracing"

	"petstore/internal/batch"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis limits: a request never waits long for a Redis that is gone, and
// while it is gone at most one request in RedisProbeEvery tries it again.
const (
	redisTimeout    = 100 * time.Millisecond // dial, read, write, waiting for a pooled connection
	RedisProbeEvery = 500 * time.Millisecond
)

// redisLink is the Redis limiter's connection, and whether Redis answers.
type redisLink struct {
	client     *redis.Client
	now        func() time.Time
	logger     *slog.Logger
	onFallback func(active bool) // RedisHooks.Fallback (may be nil)

	down      atomic.Bool
	downSince atomic.Int64 // UnixNano
	probeAt   atomic.Int64 // while down: when (UnixNano) a request may try Redis again
	outages   atomic.Int64
}

// RedisOptions are the client options for a --redis URL: short timeouts and
// no retries (a retried script could count a request twice; the fallback
// answers instead), and no maintenance notifications, which Valkey refuses.
func RedisOptions(rawURL string) (*redis.Options, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		// url.Error repeats the URL, password and all: keep only why.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("--redis must be a URL like redis://HOST:PORT/N: %v", err)
	}
	for _, timeout := range []*time.Duration{&opts.DialTimeout, &opts.ReadTimeout, &opts.WriteTimeout, &opts.PoolTimeout} {
		if *timeout == 0 {
			*timeout = redisTimeout
		}
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	opts.DialerRetries = 1
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opts, nil
}

// Where names the Redis for a log line, without its password.
func (l *redisLink) Where() string {
	opts := l.client.Options()
	return "redis://" + opts.Addr + "/" + strconv.Itoa(opts.DB)
}

// skip reports whether a request goes straight to the fallback: Redis is
// down and another request tried it less than RedisProbeEvery ago.
func (l *redisLink) skip() bool {
	if !l.down.Load() {
		return false
	}
	now := l.now().UnixNano()
	at := l.probeAt.Load()
	return now < at || !l.probeAt.CompareAndSwap(at, now+int64(RedisProbeEvery))
}

// failed notes that Redis did not answer. It reports whether that began an
// outage, which is then logged, counted and told to onFallback.
func (l *redisLink) failed(err error) bool {
	now := l.now()
	l.probeAt.Store(now.Add(RedisProbeEvery).UnixNano())
	if !l.down.CompareAndSwap(false, true) {
		return false
	}
	l.downSince.Store(now.UnixNano())
	l.outages.Add(1)
	l.logger.Warn("Redis does not answer: this server limits requests on its own until it does", "err", err)
	if l.onFallback != nil {
		l.onFallback(true)
	}
	return true
}

// answered notes that Redis answered, ending an outage.
func (l *redisLink) answered() {
	if !l.down.Load() || !l.down.CompareAndSwap(true, false) {
		return
	}
	outage := l.now().Sub(time.Unix(0, l.downSince.Load()))
	l.logger.Info("Redis answers again: rate limits are shared again", "outage", outage.Round(time.Millisecond))
	if l.onFallback != nil {
		l.onFallback(false)
	}
}

// RedisLog passes go-redis's own log lines (a failed dial, say) on at
// debug level: the limiter logs each outage once itself. go-redis has one
// logger for the whole process, set by serve (redis.SetLogger).
type RedisLog struct{ Logger *slog.Logger }

func (l RedisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.Logger.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}

// scriptRunner runs limit.lua for concurrent requests in shared round
// trips: the runs that come while one round trip is under way go to Redis
// together in the next, in one pipeline, whatever becomes of the request
// that sends them.
type scriptRunner struct {
	client *redis.Client
	call   func(start time.Time) // RedisHooks.Call (may be nil)
	batch  batch.Batcher[ScriptRun]
}

// ScriptRun is one run of limit.lua in a pipeline, with its answer.
type ScriptRun struct {
	Cmd    []any // scriptArgs.encode
	Answer scriptAnswer
	Err    error
}

// maxPipeline bounds the script runs sent in one round trip.
const maxPipeline = 128

// Run runs the script once, in a shared round trip. ctx gives the run
// only its span, for the batch's links: the round trip is bounded by the
// client's own timeouts, whatever becomes of the request.
func (s *scriptRunner) Run(ctx context.Context, args scriptArgs) (scriptAnswer, error) {
	done, err := s.batch.Do(tracing.Detached(ctx), ScriptRun{Cmd: args.Encode()})
	if err != nil {
		return scriptAnswer{}, err
	}
	return done.Answer, done.Err
}

// RunBatch sends a batch of script runs in one round trip. A Redis that
// lost the script (restarted, flushed) is sent its text with the runs that
// it refused, in a second one.
func (s *scriptRunner) RunBatch(ctx context.Context, batch []ScriptRun) error {
	cmds := make([]*redis.Cmd, len(batch))
	s.send(ctx, batch, cmds, func(int) bool { return true }, false)
	s.send(ctx, batch, cmds, func(i int) bool { return cmds[i].Err() != nil && redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") }, true)
	for i, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err == nil {
			batch[i].Answer, err = decodeScriptAnswer(v)
		}
		batch[i].Err = err
	}
	return nil
}

// send sends, in one round trip, the runs of batch that pick picks, into
// their places in cmds: by the script's hash, or withText by its text. One
// run goes alone, as a plain command: a pipeline would try a refused
// connection twice, which the probe of a Redis that is away must not.
func (s *scriptRunner) send(ctx context.Context, batch []ScriptRun, cmds []*redis.Cmd, pick func(i int) bool, withText bool) {
	var start time.Time
	if s.call != nil {
		start = time.Now()
	}
	var picked []int
	for i := range batch {
		if pick(i) {
			cmds[i] = redis.NewCmd(ctx, batch[i].command(withText)...)
			picked = append(picked, i)
		}
	}
	if len(picked) == 0 {
		return
	}
	ctx, span := roundTripSpan(ctx, withText, len(picked))
	defer span.End()
	switch len(picked) {
	case 1:
		// The error is on the command.
		_ = s.client.Process(ctx, cmds[picked[0]])
	default:
		_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range picked {
				_ = p.Process(ctx, cmds[i])
			}
			return nil
		})
	}
	if s.call != nil {
		s.call(start)
	}
}

// roundTripSpan starts the span of a round trip of n script runs, under
// the batch's span when it serves a sampled request.
func roundTripSpan(ctx context.Context, withText bool, n int) (context.Context, tracing.Span) {
	ctx, span := tracing.Child(ctx, "redis round trip")
	if span.On() {
		span.SetString("db.system", "redis")
		span.SetString("db.operation.name", "EVALSHA")
		if withText {
			span.SetString("db.operation.name", "EVAL")
		}
		span.SetInt("petstore.batch.size", int64(n))
	}
	return ctx, span
}

// command is the run's command: EVALSHA, or withText EVAL with the text.
func (sr ScriptRun) command(withText bool) []any {
	if !withText {
		return sr.Cmd
	}
	cmd := slices.Clone(sr.Cmd)
	cmd[0], cmd[1] = "eval", limitScriptText
	return cmd
}
