package limits

import (
	"context"
	"slices"
	"time"

	"petstore/internal/batch"

	"github.com/redis/go-redis/v9"
)

// scriptRunner runs limit.lua for concurrent requests in shared round
// trips: the runs that come while one round trip is under way go to Redis
// together in the next, in one pipeline, whatever becomes of the request
// that sends them.
type scriptRunner struct {
	client *redis.Client
	// call is told when each round trip began, once it has ended (may be nil).
	call  func(start time.Time)
	batch batch.Batcher[ScriptRun]
}

// ScriptRun is one run of limit.lua in a pipeline, with its answer.
type ScriptRun struct {
	Cmd    []any // scriptArgs.encode
	Answer scriptAnswer
	Err    error
}

// maxPipeline bounds the script runs sent in one round trip.
const maxPipeline = 128

func newScriptRunner(client *redis.Client, call func(start time.Time)) *scriptRunner {
	s := &scriptRunner{client: client, call: call}
	s.batch = batch.Batcher[ScriptRun]{Max: maxPipeline, Run: s.RunBatch}
	return s
}

// Run runs the script once, in a shared round trip.
func (s *scriptRunner) Run(args scriptArgs) (scriptAnswer, error) {
	done, err := s.batch.Do(context.Background(), ScriptRun{Cmd: args.Encode()})
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
	switch len(picked) {
	case 0:
		return
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

// command is the run's command: EVALSHA, or withText EVAL with the text.
func (sr ScriptRun) command(withText bool) []any {
	if !withText {
		return sr.Cmd
	}
	cmd := slices.Clone(sr.Cmd)
	cmd[0], cmd[1] = "eval", limitScriptText
	return cmd
}
