//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Every process the test starts runs in its own process group and is listed
// in running until it has been reaped, so that a signal to the test (Ctrl-C,
// a CI timeout) stops all of them, by process group id, before it exits:
// MiniStack takes the Lambda bootstraps it spawned with it (they are in its
// group), cdk takes node and the CDK app.
var running = struct {
	sync.Mutex
	procs map[*proc]bool
}{procs: map[*proc]bool{}}

// proc is a process the test started.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once reaped
	err     error         // Wait's result, valid once done is closed
	once    sync.Once
}

// startProc starts argv in dir with env, output appended to logPath.
func startProc(name, dir string, env []string, logPath string, argv ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", name, err)
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childSysProcAttr()
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}

	started := make(chan error, 1)
	go func() {
		// The parent-death signal (Linux) fires when the forking *thread*
		// exits: keep this goroutine on its thread until the child is reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		running.Lock()
		running.procs[p] = true
		running.Unlock()
		started <- nil
		p.err = cmd.Wait()
		_ = logf.Close()
		running.Lock()
		delete(running.procs, p)
		running.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group (whose id is the leader's PID),
// SIGKILL after grace, and waits until the leader is reaped. The group is
// killed again after that, for children that outlived their leader.
func (p *proc) stop(grace time.Duration) {
	p.once.Do(func() {
		pgid := p.pid()
		if !p.exited() {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-p.done
			}
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH when the group is empty: fine
	})
}

// stopAll stops every process still running; the signal handler and
// TestMain call it.
func stopAll() {
	running.Lock()
	ps := make([]*proc, 0, len(running.procs))
	for p := range running.procs {
		ps = append(ps, p)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(10 * time.Second) }()
	}
	wg.Wait()
}

// runProc runs argv to completion (or until ctx is done, when it is stopped),
// its output in logPath. A failure carries the end of that log.
func runProc(ctx context.Context, name, dir string, env []string, logPath string, argv ...string) error {
	p, err := startProc(name, dir, env, logPath, argv...)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(5 * time.Second)
		return fmt.Errorf("%s: %w; last lines of %s:\n%s", name, ctx.Err(), logPath, tail(logPath, 40))
	}
	if p.err != nil {
		return fmt.Errorf("%s failed (%v); last lines of %s:\n%s", name, p.err, logPath, tail(logPath, 40))
	}
	return nil
}

// tail returns the last n lines of the file, indented, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	const maxTail = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		_, _ = f.Seek(st.Size()-maxTail, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil && !errors.Is(err, io.EOF) {
		return "    (reading log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var sb strings.Builder
	for i, l := range lines {
		if i > 0 {
			sb.WriteByte('\n')
		}
		if len(l) > 400 {
			l = append(l[:400:400], "…"...)
		}
		sb.WriteString("    ")
		sb.Write(l)
	}
	return sb.String()
}

// lockFile takes an exclusive flock on path, polling until ctx is done. The
// kernel drops the lock when the process dies, so a killed install leaves no
// stale lock.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
