package logline

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
	sameBytes(t, json, rec, func(h *Handler) error { return h.Handle(context.Background(), rec.Clone()) })
}

// sameRequestLine is sameLine for the request line that lineHandler writes
// without a record.
func sameRequestLine(t testing.TB, json bool, line RequestLine) {
	t.Helper()
	sameBytes(t, json, line.Record(), func(h *Handler) error { return h.WriteRequestLine(context.Background(), &line) })
}

// sameBytes fails unless write, given a lineHandler, writes what slog's own
// handler of the format writes for rec.
func sameBytes(t testing.TB, json bool, rec slog.Record, write func(*Handler) error) {
	t.Helper()
	var got, want bytes.Buffer
	fast := NewHandler(&got, json, slog.LevelDebug)
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
		line RequestLine
	}{
		{"a read with a key", RequestLine{Time: at, Level: slog.LevelInfo, Method: "GET", Path: "/v1/pets/7", Status: 200,
			Duration: 12345 * time.Nanosecond, Bytes: 58, RequestID: "0a1b2c3d4e5f-1bxr", KeyID: 7}},
		{"a sampled request", RequestLine{Time: at, Level: slog.LevelInfo, Method: "POST", Path: "/v1/pets", Status: 201,
			Duration: time.Millisecond, Bytes: 80, RequestID: "r", KeyID: 3, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}},
		{"a 401 without a key", RequestLine{Time: at, Level: slog.LevelInfo, Method: "GET", Path: "/v1/pets", Status: 401,
			Duration: time.Millisecond, Bytes: 120, RequestID: "client-chosen"}},
		{"a 500 with a stack trace", RequestLine{Time: at, Level: slog.LevelError, Method: "POST", Path: "/v1/pets", Status: 500,
			Duration: 2 * time.Second, Bytes: 99, RequestID: "x", KeyID: 1, Err: errors.New("panic: boom\ngoroutine 1 [running]:\n\tmain.go:12")}},
		{"a path and id that need quoting", RequestLine{Time: at.In(time.FixedZone("CET", 3600)), Level: slog.LevelInfo,
			Method: "GET", Path: "/v1/pets/a b=\"c\"\u00a0é", Status: 404, RequestID: `say"hi"`}},
		{"a time slog writes itself", RequestLine{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Level: slog.LevelInfo,
			Method: "GET", Path: "/", Status: 200}},
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
		fast := NewHandler(&got, json, slog.LevelInfo)
		var std slog.Handler = slog.NewTextHandler(&want, nil)
		if json {
			std = slog.NewJSONHandler(&want, nil)
		}
		for _, at := range times {
			got.Reset()
			want.Reset()
			line := RequestLine{Time: at, Level: slog.LevelInfo, Method: "GET", Path: "/v1/pets", Status: 200}
			fast.WriteRequestLine(context.Background(), &line)
			rec := line.Record()
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
		slog.New(NewHandler(&got, json, slog.LevelInfo)).With("env", "staging").WithGroup("g").Info("hi", "n", 1)
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
	logger := slog.New(NewHandler(&logs, false, slog.LevelWarn))
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
		line := RequestLine{Time: time.Unix(n, n), Level: slog.Level(n % 16), Method: key, Path: value,
			Status: int(n % 600), Duration: time.Duration(n), Bytes: n, RequestID: value, KeyID: n % 3}
		if n%5 == 0 {
			line.Err = errors.New(value)
		}
		sameRequestLine(t, false, line)
		sameRequestLine(t, true, line)
	})
}

// BenchmarkRequestLine is the log line of every request, as logRequest
// writes it: lineHandler straight from the requestLine, against slog's own
// handler given the record.
func BenchmarkRequestLine(b *testing.B) {
	line := RequestLine{Level: slog.LevelInfo, Method: "GET", Path: "/v1/pets", Status: 200,
		Duration: 12345 * time.Nanosecond, Bytes: 1406, RequestID: "0a1b2c3d4e5f-1bxr", KeyID: 7}
	for _, format := range []string{"text", "json"} {
		json := format == "json"
		std := slog.Handler(slog.NewTextHandler(io.Discard, nil))
		if json {
			std = slog.NewJSONHandler(io.Discard, nil)
		}
		fast := NewHandler(io.Discard, json, slog.LevelInfo)
		b.Run(format+"/lineHandler", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				line.Time = time.Now()
				fast.WriteRequestLine(context.Background(), &line)
			}
		})
		b.Run(format+"/slog", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				line.Time = time.Now()
				std.Handle(context.Background(), line.Record())
			}
		})
	}
}
