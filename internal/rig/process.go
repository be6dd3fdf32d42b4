package rig

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
	"syscall"
	"time"
)

// process is an emulator the rig started, in its own process group so that
// stopping it also stops anything it spawned, and so that a Ctrl-C meant for
// the command under test does not reach it before the rig decides to stop it.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has been reaped
	err     error         // Wait's result, valid after done is closed
}

// startProcess starts argv with its output going to logPath.
func startProcess(name string, argv []string, dir string, env []string, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = emulatorSysProcAttr()
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}

	started := make(chan error, 1)
	go func() {
		// On Linux the child gets SIGKILL when its parent *thread* exits
		// (Pdeathsig), so that emulators die with a rig that is killed
		// outright. Keep the forking goroutine on its thread until the
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
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits until the process is reaped.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	pgid := p.pid() // Setpgid makes the leader's pid the group id
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// exitError describes how the process ended, with the end of its log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s",
		p.name, p.err, p.logPath, tailFile(p.logPath, 30))
}

// runLogged runs a setup command (mvn, pip, javac) to completion with its
// output in logPath; on failure the error carries the end of that log.
// Cancelling ctx kills the command's whole process group.
func runLogged(ctx context.Context, logPath, dir string, env []string, argv ...string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening log: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "$ %s\n", strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", argv[0], ctx.Err())
		}
		return fmt.Errorf("%s failed (%w); last lines of %s:\n%s", argv[0], err, logPath, tailFile(logPath, 30))
	}
	return nil
}

// tailFile returns the last n lines of the file at path, indented, for error
// messages.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	const maxTail = 64 << 10
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
		sb.Write(l)
	}
	return sb.String()
}
