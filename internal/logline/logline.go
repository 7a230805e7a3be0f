// Package logline is the service's log: the slog handler (Handler) that
// writes each request's line (RequestLine), and the buffer that batches the
// lines into few writes. A leaf: of the project it imports only appendjson.
package logline

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"petstore/internal/appendjson"
)

// Handler is a slog.Handler that writes the same lines as slog's
// TextHandler or JSONHandler, in about half the time, for the records this
// service logs on every request: attributes that are strings, integers,
// booleans and durations. Any other record, and any logger derived with
// With or WithGroup, is handled by slog's own handler. slog's handlers
// spend more per request line than the rest of a cached read.
type Handler struct {
	std    slog.Handler // slog's TextHandler or JSONHandler, on the same writer
	json   bool
	w      *lockedWriter
	second atomic.Pointer[formattedSecond] // of the last line written
}

func NewHandler(w io.Writer, json bool, level slog.Leveler) *Handler {
	h := &Handler{json: json, w: &lockedWriter{w: w}}
	opts := &slog.HandlerOptions{Level: level}
	if json {
		h.std = slog.NewJSONHandler(h.w, opts)
	} else {
		h.std = slog.NewTextHandler(h.w, opts)
	}
	return h
}

// lockedWriter writes one line at a time, whichever handler writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.std.Enabled(ctx, level)
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.std.WithAttrs(attrs) }
func (h *Handler) WithGroup(name string) slog.Handler       { return h.std.WithGroup(name) }

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// inRange reports whether t is a time Handler writes as slog would: slog
// writes years outside 0..9999, and the zero time, its own way.
func inRange(t time.Time) bool {
	y := t.Year()
	return !t.IsZero() && y >= 0 && y <= 9999
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !inRange(r.Time) {
		return h.std.Handle(ctx, r)
	}
	bp := lineBuffers.Get().(*[]byte)
	defer putLineBuffer(bp)
	b := h.appendStart((*bp)[:0], r.Time, r.Level, r.Message)
	plain := true
	r.Attrs(func(a slog.Attr) bool {
		b, plain = h.appendAttr(b, a)
		return plain
	})
	*bp = b
	if !plain {
		return h.std.Handle(ctx, r)
	}
	return h.writeLine(bp, b)
}

// WriteRequestLine writes the line Handle writes for l.Record(), without making
// the record: this line is written for every request.
func (h *Handler) WriteRequestLine(ctx context.Context, l *RequestLine) error {
	if !inRange(l.Time) {
		return h.std.Handle(ctx, l.Record())
	}
	bp := lineBuffers.Get().(*[]byte)
	defer putLineBuffer(bp)
	b := h.appendStart((*bp)[:0], l.Time, l.Level, requestMessage)
	// The keys are plain words: none needs quoting.
	b = h.appendString(h.appendKey(b, "method"), l.Method)
	b = h.appendString(h.appendKey(b, "path"), l.Path)
	b = strconv.AppendInt(h.appendKey(b, "status"), int64(l.Status), 10)
	b = h.appendDuration(h.appendKey(b, "duration"), l.Duration)
	b = strconv.AppendInt(h.appendKey(b, "bytes"), l.Bytes, 10)
	b = h.appendString(h.appendKey(b, "request_id"), l.RequestID)
	if l.KeyID != 0 {
		b = strconv.AppendInt(h.appendKey(b, "key_id"), l.KeyID, 10)
	}
	if l.TraceID != "" {
		b = h.appendString(h.appendKey(b, "trace_id"), l.TraceID)
		b = h.appendString(h.appendKey(b, "span_id"), l.SpanID)
	}
	if l.Err != nil {
		b = h.appendString(h.appendKey(b, "err"), l.Err.Error())
	}
	return h.writeLine(bp, b)
}

func putLineBuffer(bp *[]byte) {
	if cap(*bp) <= 16<<10 { // a huge line (a stack trace) is not kept
		lineBuffers.Put(bp)
	}
}

// appendStart writes what every line starts with: time, level and message.
func (h *Handler) appendStart(b []byte, t time.Time, level slog.Level, msg string) []byte {
	if h.json {
		b = append(b, `{"time":"`...)
		b = h.appendTime(b, t)
		b = append(b, `","level":`...)
		b = appendjson.String(b, level.String())
		b = append(b, `,"msg":`...)
		return appendjson.String(b, msg)
	}
	b = append(b, "time="...)
	b = h.appendTime(b, t)
	b = append(b, " level="...)
	b = appendTextString(b, level.String())
	b = append(b, " msg="...)
	return appendTextString(b, msg)
}

// writeLine ends the line b, which is held in *bp, and writes it.
func (h *Handler) writeLine(bp *[]byte, b []byte) error {
	if h.json {
		b = append(b, '}')
	}
	b = append(b, '\n')
	*bp = b
	_, err := h.w.Write(b)
	return err
}

// appendAttr writes a; ok is false, and b is of no use, when a is not of a
// kind it writes: slog's handler must write the record.
func (h *Handler) appendAttr(b []byte, a slog.Attr) (_ []byte, ok bool) {
	v := a.Value
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration:
		if a.Key == "" || (!h.json && needsQuoting(a.Key)) {
			return b, false
		}
	default:
		return b, false
	}
	b = h.appendKey(b, a.Key)
	switch v.Kind() {
	case slog.KindString:
		return h.appendString(b, v.String()), true
	case slog.KindDuration:
		return h.appendDuration(b, v.Duration()), true
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	default: // slog.KindBool
		return strconv.AppendBool(b, v.Bool()), true
	}
}

// appendKey writes the separator and key before a value; in text, key must
// not need quoting.
func (h *Handler) appendKey(b []byte, key string) []byte {
	if h.json {
		b = append(b, ',')
		b = appendjson.String(b, key)
		return append(b, ':')
	}
	b = append(b, ' ')
	b = append(b, key...)
	return append(b, '=')
}

func (h *Handler) appendString(b []byte, s string) []byte {
	if h.json {
		return appendjson.String(b, s)
	}
	return appendTextString(b, s)
}

// appendDuration writes d as slog does: nanoseconds in JSON, d.String() in
// text.
func (h *Handler) appendDuration(b []byte, d time.Duration) []byte {
	if h.json {
		return strconv.AppendInt(b, int64(d), 10)
	}
	return append(b, d.String()...)
}

// formattedSecond is the date, time and zone of one second as RFC 3339
// writes them: every line of that second starts with them.
type formattedSecond struct {
	unix int64
	loc  *time.Location
	date string // 2006-01-02T15:04:05
	zone string // Z07:00
}

// appendTime writes t as slog does: with exactly three digits of fraction in
// text, as RFC3339Nano in JSON. Formatting the second is left to the line
// before whenever it had the same one. t's year is in 0..9999.
func (h *Handler) appendTime(b []byte, t time.Time) []byte {
	s := h.second.Load()
	if s == nil || s.unix != t.Unix() || s.loc != t.Location() {
		f := t.AppendFormat(nil, "2006-01-02T15:04:05Z07:00")
		s = &formattedSecond{unix: t.Unix(), loc: t.Location(), date: string(f[:19]), zone: string(f[19:])}
		h.second.Store(s)
	}
	b = append(b, s.date...)
	ns := t.Nanosecond()
	if !h.json {
		ms := ns / 1e6
		b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	} else if ns != 0 { // nine digits without their trailing zeros
		var fraction [10]byte
		fraction[0] = '.'
		for i := 9; i > 0; i-- {
			fraction[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(fraction)
		for fraction[n-1] == '0' {
			n--
		}
		b = append(b, fraction[:n]...)
	}
	return append(b, s.zone...)
}

// appendTextString writes s as slog's TextHandler does: bare when it is
// safe, else Go-quoted.
func appendTextString(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// needsQuoting is slog's rule for text values: empty strings, spaces, '=',
// quotes, control characters and anything not printable are quoted.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if !textCheck[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			return true
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// textCheck marks the bytes needsQuoting must look at: the ASCII ones that
// make slog quote a value, and every byte of a multi-byte character. The
// others, most of a log line, cost one look-up.
var textCheck = func() (table [256]bool) {
	for c := range table {
		table[c] = c <= ' ' || c == '=' || c == '"' || c >= utf8.RuneSelf
	}
	return table
}()

// RequestLine is what the log says of each request.
type RequestLine struct {
	Time      time.Time
	Level     slog.Level
	Method    string
	Path      string
	Status    int
	Duration  time.Duration
	Bytes     int64
	RequestID string
	KeyID     int64 // 0: the request had no key (key ids start at 1)
	// TraceID and SpanID are the request's server span's, in hex, when it
	// is sampled (docs/observing.md, "Traces"); "" otherwise.
	TraceID, SpanID string
	Err             error
}

const requestMessage = "request"

// Record is the line as a slog record. It is made with NewRecord rather than
// by logger.LogAttrs, which would look up the caller's source line; that is
// never printed.
func (l *RequestLine) Record() slog.Record {
	rec := slog.NewRecord(l.Time, l.Level, requestMessage, 0)
	rec.AddAttrs(
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.Int("status", l.Status),
		slog.Duration("duration", l.Duration),
		slog.Int64("bytes", l.Bytes),
		slog.String("request_id", l.RequestID),
	)
	if l.KeyID != 0 {
		rec.AddAttrs(slog.Int64("key_id", l.KeyID))
	}
	if l.TraceID != "" {
		rec.AddAttrs(slog.String("trace_id", l.TraceID), slog.String("span_id", l.SpanID))
	}
	if l.Err != nil {
		rec.AddAttrs(slog.String("err", l.Err.Error()))
	}
	return rec
}

// Buffer collects log lines and writes them out in batches: a write
// system call per request costs more than the rest of the log line. Lines
// reach the destination within FlushEvery, at once when the buffer
// fills, and on the last Flush at shutdown. A crash loses at most that much.
type Buffer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

const (
	FlushEvery = 100 * time.Millisecond
	BufferSize = 32 << 10
)

func NewBuffer(w io.Writer) *Buffer {
	return &Buffer{w: w, buf: make([]byte, 0, BufferSize)}
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= BufferSize {
		b.flushLocked()
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *Buffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *Buffer) flushLocked() {
	if len(b.buf) > 0 {
		b.w.Write(b.buf) // a log that cannot be written has nowhere to report it
		b.buf = b.buf[:0]
	}
}
