package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// sameLine logs rec with lineHandler and with slog's own handler of the same
// format, and fails unless the bytes are the same.
func sameLine(t testing.TB, json bool, rec slog.Record) {
	t.Helper()
	sameBytes(t, json, rec, func(h *lineHandler) error { return h.Handle(context.Background(), rec.Clone()) })
}

// sameRequestLine is sameLine for the request line that lineHandler writes
// without a record.
func sameRequestLine(t testing.TB, json bool, line requestLine) {
	t.Helper()
	sameBytes(t, json, line.record(), func(h *lineHandler) error { return h.writeRequestLine(context.Background(), &line) })
}

// sameBytes fails unless write, given a lineHandler, writes what slog's own
// handler of the format writes for rec.
func sameBytes(t testing.TB, json bool, rec slog.Record, write func(*lineHandler) error) {
	t.Helper()
	var got, want bytes.Buffer
	fast := newLineHandler(&got, json, slog.LevelDebug)
	var std slog.Handler = slog.NewTextHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug})
	if json {
		std = slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	if err := write(fast); err != nil {
		t.Fatal(err)
	}
	std.Handle(context.Background(), rec.Clone())
	if got.String() != want.String() {
		t.Errorf("json=%v\n got: %q\nwant: %q", json, got.String(), want.String())
	}
}

func TestLineHandlerWritesWhatSlogWrites(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 5, 7, 120_000_000, time.FixedZone("CET", 3600))
	tests := []struct {
		name  string
		level slog.Level
		msg   string
		attrs []slog.Attr
	}{
		{"the request line", slog.LevelInfo, "request", []slog.Attr{
			slog.String("method", "GET"), slog.String("path", "/v1/pets"), slog.Int("status", 200),
			slog.Duration("duration", 1234567*time.Nanosecond), slog.Int64("bytes", 1406),
			slog.String("request_id", "0a1b2c3d4e5f-1"), slog.Int64("key_id", 7)}},
		{"a 500 with a stack trace", slog.LevelError, "request", []slog.Attr{
			slog.String("err", "panic: boom\ngoroutine 1 [running]:\n\tmain.go:12 +0x1d")}},
		{"strings that need quoting", slog.LevelWarn, "a message with spaces", []slog.Attr{
			slog.String("empty", ""), slog.String("space", "a b"), slog.String("equals", "a=b"),
			slog.String("quote", `say "hi"`), slog.String("backslash", `C:\pets`), slog.String("tab", "a\tb"),
			slog.String("nul", "a\x00b"), slog.String("del", "a\x7fb"), slog.String("html", "<a&b>"),
			slog.String("unicode", "chat-été"), slog.String("nbsp", "a\u00a0b"), slog.String("line separator", "a\u2028b"),
			slog.String("invalid utf-8", "a\xffb"), slog.String("replacement", "a\ufffdb")}},
		{"integers, booleans and durations", slog.LevelDebug, "", []slog.Attr{
			slog.Int64("negative", -42), slog.Uint64("big", 1<<63), slog.Bool("yes", true), slog.Bool("no", false),
			slog.Duration("zero", 0), slog.Duration("long", 26*time.Hour+3*time.Millisecond)}},
		{"a level between the named ones", slog.LevelInfo + 2, "odd level", nil},
		{"kinds slog's handler writes itself", slog.LevelInfo, "other kinds", []slog.Attr{
			slog.Float64("float", 1.5), slog.Time("at", at), slog.Any("err", errors.New("disk full")),
			slog.Group("g", slog.Int("a", 1)), slog.Any("nil", nil)}},
		{"a key that needs quoting", slog.LevelInfo, "keys", []slog.Attr{slog.String("a key", "v")}},
		{"an empty key", slog.LevelInfo, "keys", []slog.Attr{slog.String("", "v")}},
	}
	for _, tt := range tests {
		for _, json := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				rec := slog.NewRecord(at, tt.level, tt.msg, 0)
				rec.AddAttrs(tt.attrs...)
				sameLine(t, json, rec)
			})
		}
	}
}

func TestRequestLineIsWhatSlogWrites(t *testing.T) {
	at := time.Date(2026, 11, 22, 9, 5, 7, 120_000_000, time.UTC)
	tests := []struct {
		name string
		line requestLine
	}{
		{"a read with a key", requestLine{time: at, level: slog.LevelInfo, method: "GET", path: "/v1/pets/7", status: 200,
			duration: 12345 * time.Nanosecond, bytes: 58, requestID: "0a1b2c3d4e5f-1bxr", keyID: 7}},
		{"a 401 without a key", requestLine{time: at, level: slog.LevelInfo, method: "GET", path: "/v1/pets", status: 401,
			duration: time.Millisecond, bytes: 120, requestID: "client-chosen"}},
		{"a 500 with a stack trace", requestLine{time: at, level: slog.LevelError, method: "POST", path: "/v1/pets", status: 500,
			duration: 2 * time.Second, bytes: 99, requestID: "x", keyID: 1, err: errors.New("panic: boom\ngoroutine 1 [running]:\n\tmain.go:12")}},
		{"a path and id that need quoting", requestLine{time: at.In(time.FixedZone("CET", 3600)), level: slog.LevelInfo,
			method: "GET", path: "/v1/pets/a b=\"c\"\u00a0é", status: 404, requestID: `say"hi"`}},
		{"a time slog writes itself", requestLine{time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), level: slog.LevelInfo,
			method: "GET", path: "/", status: 200}},
	}
	for _, tt := range tests {
		for _, json := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) { sameRequestLine(t, json, tt.line) })
		}
	}
}

func TestLineTimesAreWhatSlogWritesAcrossSecondsAndZones(t *testing.T) {
	base := time.Date(2026, 11, 22, 9, 5, 7, 0, time.UTC)
	cet, west := time.FixedZone("CET", 3600), time.FixedZone("", -(7*3600+30*60))
	times := []time.Time{
		base, base.Add(5 * time.Millisecond), base.Add(999_999_999), // one second
		base.Add(time.Second + 120*time.Millisecond), // the next
		base.Add(time.Second + 1).In(cet),            // the same second in another zone
		base.Add(time.Second + 100).In(west),
		base.Add(time.Second + 123_456_789), // back to UTC
		time.Now(), time.Now(),              // with a monotonic reading
		time.Date(1969, 12, 31, 23, 59, 59, 500_000_000, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, cet),
		base,
	}
	for _, json := range []bool{false, true} {
		var got, want bytes.Buffer
		fast := newLineHandler(&got, json, slog.LevelInfo)
		var std slog.Handler = slog.NewTextHandler(&want, nil)
		if json {
			std = slog.NewJSONHandler(&want, nil)
		}
		for _, at := range times {
			got.Reset()
			want.Reset()
			line := requestLine{time: at, level: slog.LevelInfo, method: "GET", path: "/v1/pets", status: 200}
			fast.writeRequestLine(context.Background(), &line)
			rec := line.record()
			fast.Handle(context.Background(), rec)
			std.Handle(context.Background(), rec)
			std.Handle(context.Background(), rec)
			if got.String() != want.String() {
				t.Errorf("json=%v, %v:\n got: %q\nwant: %q", json, at, got.String(), want.String())
			}
		}
	}
}

func TestLineHandlerLeavesDerivedLoggersToSlog(t *testing.T) {
	for _, json := range []bool{false, true} {
		var got, want bytes.Buffer
		slog.New(newLineHandler(&got, json, slog.LevelInfo)).With("env", "staging").WithGroup("g").Info("hi", "n", 1)
		std := slog.Handler(slog.NewTextHandler(&want, nil))
		if json {
			std = slog.NewJSONHandler(&want, nil)
		}
		slog.New(std).With("env", "staging").WithGroup("g").Info("hi", "n", 1)
		// The times differ; everything after them must not.
		_, g, _ := bytes.Cut(got.Bytes(), []byte("level"))
		_, w, _ := bytes.Cut(want.Bytes(), []byte("level"))
		if !bytes.Equal(g, w) {
			t.Errorf("json=%v\n got: %q\nwant: %q", json, got.String(), want.String())
		}
	}
}

func TestLineHandlerHonoursTheLevel(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(newLineHandler(&logs, false, slog.LevelWarn))
	logger.Info("dropped")
	logger.Warn("kept")
	if got := logs.String(); bytes.Contains(logs.Bytes(), []byte("dropped")) || !bytes.Contains(logs.Bytes(), []byte("kept")) {
		t.Errorf("with level warn the log is %q", got)
	}
}

func FuzzLogLine(f *testing.F) {
	for _, s := range []string{"", "plain", "a b", "a=b", `"`, "\\", "\x00\x1f\x7f", "é\u00a0\u2028", "\xff\xfe", "\ufffd"} {
		f.Add(s, s, int64(len(s)))
	}
	f.Fuzz(func(t *testing.T, key, value string, n int64) {
		rec := slog.NewRecord(time.Unix(n, n), slog.Level(n%16), value, 0)
		rec.AddAttrs(slog.String(key, value), slog.Int64("n", n), slog.Duration("d", time.Duration(n)))
		sameLine(t, false, rec)
		sameLine(t, true, rec)
		line := requestLine{time: time.Unix(n, n), level: slog.Level(n % 16), method: key, path: value,
			status: int(n % 600), duration: time.Duration(n), bytes: n, requestID: value, keyID: n % 3}
		if n%5 == 0 {
			line.err = errors.New(value)
		}
		sameRequestLine(t, false, line)
		sameRequestLine(t, true, line)
	})
}

// BenchmarkRequestLine is the log line of every request, as logRequest
// writes it: lineHandler straight from the requestLine, against slog's own
// handler given the record.
func BenchmarkRequestLine(b *testing.B) {
	line := requestLine{level: slog.LevelInfo, method: "GET", path: "/v1/pets", status: 200,
		duration: 12345 * time.Nanosecond, bytes: 1406, requestID: "0a1b2c3d4e5f-1bxr", keyID: 7}
	for _, format := range []string{"text", "json"} {
		json := format == "json"
		std := slog.Handler(slog.NewTextHandler(io.Discard, nil))
		if json {
			std = slog.NewJSONHandler(io.Discard, nil)
		}
		fast := newLineHandler(io.Discard, json, slog.LevelInfo)
		b.Run(format+"/lineHandler", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				line.time = time.Now()
				fast.writeRequestLine(context.Background(), &line)
			}
		})
		b.Run(format+"/slog", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				line.time = time.Now()
				std.Handle(context.Background(), line.record())
			}
		})
	}
}
