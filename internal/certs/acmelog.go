package certs

import (
	"context"
	"log/slog"
	"slices"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap core that writes certmagic's log lines (obtaining,
// challenges, renewals, retries) into the server's own log, at the same
// levels, each field an attribute.
type zapToSlog struct {
	logger *slog.Logger
	fields []zapcore.Field
}

// acmeLogger is certmagic's logger, writing into logger.
func acmeLogger(logger *slog.Logger) *zap.Logger {
	return zap.New(zapToSlog{logger: logger.With("component", "acme")})
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c zapToSlog) Enabled(l zapcore.Level) bool {
	return c.logger.Enabled(context.Background(), slogLevel(l))
}

func (c zapToSlog) With(fields []zapcore.Field) zapcore.Core {
	return zapToSlog{logger: c.logger, fields: append(slices.Clip(c.fields), fields...)}
}

func (c zapToSlog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapToSlog) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range append(slices.Clip(c.fields), fields...) {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		attrs = append(attrs, k, enc.Fields[k])
	}
	c.logger.Log(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (zapToSlog) Sync() error { return nil }
