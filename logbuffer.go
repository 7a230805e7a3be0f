package main

import (
	"io"
	"sync"
	"time"
)

// logBuffer collects log lines and writes them out in batches: a write
// system call per request costs more than the rest of the log line. Lines
// reach the destination within logFlushEvery, at once when the buffer
// fills, and on the last Flush at shutdown. A crash loses at most that much.
type logBuffer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

const (
	logFlushEvery = 100 * time.Millisecond
	logBufferSize = 32 << 10
)

func newLogBuffer(w io.Writer) *logBuffer {
	return &logBuffer{w: w, buf: make([]byte, 0, logBufferSize)}
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferSize {
		b.flushLocked()
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) > 0 {
		b.w.Write(b.buf) // a log that cannot be written has nowhere to report it
		b.buf = b.buf[:0]
	}
}
