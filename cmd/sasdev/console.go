package main

import (
	"fmt"
	"io"
	"sync"
)

// console is the terminal: stdout has what a user copies or reads (the
// export lines and commands, a line per order), stderr the dev server's
// notes. Lines from many goroutines never interleave.
type console struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer // locked too: the rig writes its progress there
}

func newConsole(stdout, stderr io.Writer) *console {
	c := &console{stdout: stdout}
	c.stderr = lockedWriter{mu: &c.mu, w: stderr}
	return c
}

// println writes a line to stdout.
func (c *console) println(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintln(c.stdout, line)
}

// info writes a note to stderr.
func (c *console) info(format string, args ...any) {
	fmt.Fprintf(c.stderr, "sasdev: "+format+"\n", args...)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
