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
	var got, want bytes.Buffer
	fast := newLineHandler(&got, json, slog.LevelDebug)
	var std slog.Handler = slog.NewTextHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug})
	if json {
		std = slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	if err := fast.Handle(context.Background(), rec.Clone()); err != nil {
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
	})
}

// BenchmarkRequestLine is the log line of every request, as logRequest
// makes it, through lineHandler and through slog's own handler.
func BenchmarkRequestLine(b *testing.B) {
	record := func() slog.Record {
		rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		rec.AddAttrs(slog.String("method", "GET"), slog.String("path", "/v1/pets"), slog.Int("status", 200),
			slog.Duration("duration", 12345*time.Nanosecond), slog.Int64("bytes", 1406),
			slog.String("request_id", "0a1b2c3d4e5f-1bxr"), slog.Int64("key_id", 7))
		return rec
	}
	for _, format := range []string{"text", "json"} {
		json := format == "json"
		std := slog.Handler(slog.NewTextHandler(io.Discard, nil))
		if json {
			std = slog.NewJSONHandler(io.Discard, nil)
		}
		for _, h := range []struct {
			name    string
			handler slog.Handler
		}{{"lineHandler", newLineHandler(io.Discard, json, slog.LevelInfo)}, {"slog", std}} {
			b.Run(format+"/"+h.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					h.handler.Handle(context.Background(), record())
				}
			})
		}
	}
}
