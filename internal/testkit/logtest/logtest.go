// Package logtest is where tests and the test kit keep what loggers write:
// a buffer that the goroutines of a handler, a poller or a whole local
// system may write at once.
package logtest

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use, for an slog handler to
// write to and a test to read.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Records decodes the JSON lines written so far (slog's JSON handler) whose
// "msg" is msg, or every line when msg is empty. A line that is not a JSON
// object is skipped.
func (l *Buffer) Records(msg string) []map[string]any {
	l.mu.Lock()
	data := bytes.Clone(l.b.Bytes())
	l.mu.Unlock()
	var out []map[string]any
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var rec map[string]any
		if len(line) == 0 || json.Unmarshal(line, &rec) != nil {
			continue
		}
		if msg == "" || rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}
