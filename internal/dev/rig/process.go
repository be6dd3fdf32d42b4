package rig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec says what StartProcess runs.
type ProcessSpec struct {
	// Name names the process in errors ("DynamoDB Local", "pip install").
	Name string
	// Argv is the program and its arguments; Argv[0] is looked up on PATH
	// when it has no slash.
	Argv []string
	// Dir is the working directory; "" is the caller's.
	Dir string
	// Env is the environment; nil is the caller's (as for exec.Cmd).
	Env []string
	// LogPath receives a "$ argv" line, then the process's stdout and
	// stderr, appended.
	LogPath string
}

// Process is a process started by StartProcess. It runs in its own process
// group, so that stopping it also stops anything it spawned (MiniStack's
// Lambda processes, the JVM of a launcher script), and so that a Ctrl-C
// meant for the command in the foreground does not reach it before its
// owner decides to stop it. On Linux the kernel also kills it (SIGKILL) if
// its owner dies without stopping it: SIGKILL, a crash, a test binary's
// timeout panic.
type Process struct {
	spec     ProcessSpec
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has been reaped
	err      error         // Wait's result, valid after done is closed
	stopOnce sync.Once
}

// StartProcess starts spec.Argv with its output appended to spec.LogPath.
func StartProcess(spec ProcessSpec) (*Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("starting %s: no command", spec.Name)
	}
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the %s log: %w", spec.Name, err)
	}
	fmt.Fprintf(logf, "$ %s\n", strings.Join(spec.Argv, " "))
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = childSysProcAttr()
	p := &Process{spec: spec, cmd: cmd, done: make(chan struct{})}

	started := make(chan error, 1)
	go func() {
		// On Linux the child gets SIGKILL when its parent *thread* exits
		// (Pdeathsig). Keep the forking goroutine on its thread until the
		// child is reaped: the Go runtime then never retires that thread
		// under a live child.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", spec.Name, spec.Argv[0], err)
	}
	return p, nil
}

// RunProcess runs spec to completion, or until ctx is done, when it stops
// the process. A failure carries the end of the log.
func RunProcess(ctx context.Context, spec ProcessSpec) error {
	return runWith(ctx, StartProcess, spec)
}

// runWith is RunProcess with the emulators' own start function (their
// options' StartProcess, which the e2e test replaces).
func runWith(ctx context.Context, start func(ProcessSpec) (*Process, error), spec ProcessSpec) error {
	p, err := start(spec)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// WaitHealthy polls url until it answers 200, the process ends (its exit
// error), or within passes (an error with the end of the log): how the
// rig waits for an emulator it started.
func (p *Process) WaitHealthy(ctx context.Context, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if p.Exited() {
			return p.ExitError()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s at %s did not answer its health check within %s; last lines of %s:\n%s",
				p.spec.Name, url, within, p.spec.LogPath, TailFile(p.spec.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// PID is the process id, which is also its process group's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath is where the process's output goes.
func (p *Process) LogPath() string { return p.spec.LogPath }

// Done is closed once the process has ended and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits until the process ends and returns nil if it exited with
// status 0. If ctx is done first, Wait stops the process and returns ctx's
// error. Either error carries the end of the log.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Stop(5 * time.Second)
		return fmt.Errorf("%s: %w; last lines of %s:\n%s", p.spec.Name, ctx.Err(), p.spec.LogPath, TailFile(p.spec.LogPath, 40))
	}
	if p.err != nil {
		return fmt.Errorf("%s failed (%w); last lines of %s:\n%s", p.spec.Name, p.err, p.spec.LogPath, TailFile(p.spec.LogPath, 40))
	}
	return nil
}

// ExitError describes how a process that was meant to keep running ended,
// with the end of its log. Call it once Exited.
func (p *Process) ExitError() error {
	<-p.done
	return fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s",
		p.spec.Name, p.err, p.spec.LogPath, TailFile(p.spec.LogPath, 30))
}

// Stop sends SIGTERM to the process group, SIGKILL after grace, and waits
// until the process is reaped. The group is then sent SIGKILL again, for
// children that outlived their leader. Stop may be called more than once,
// and concurrently; later calls wait for the first.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pgid := p.PID() // Setpgid makes the leader's pid the group id
		if !p.Exited() {
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

// TailFile returns the last n lines of the file at path, indented, for error
// messages. It reads at most the last 256 KiB and cuts lines longer than 400
// bytes.
func TailFile(path string, n int) string {
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
	return indentTail(b, n)
}

func indentTail(b []byte, n int) string {
	const maxLine = 400
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && len(lines[0]) == 0 {
		return "    (log is empty)"
	}
	var sb strings.Builder
	for i, l := range lines {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString("    ")
		if len(l) > maxLine {
			sb.Write(l[:maxLine])
			sb.WriteString("…")
			continue
		}
		sb.Write(l)
	}
	return sb.String()
}
