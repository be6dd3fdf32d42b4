package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// LockFile takes an exclusive flock on path, waiting until ctx is done. The
// kernel releases the lock when the process dies, so a killed install never
// leaves a stale lock behind. If note is not nil, a line is written to it
// once if the wait is long enough to be noticed.
func LockFile(ctx context.Context, path string, note io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	// flock cannot be interrupted by a context, so poll with LOCK_NB.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	noted := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !noted && note != nil {
			fmt.Fprintf(note, "rig: waiting for another rig that holds %s\n", path)
			noted = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
