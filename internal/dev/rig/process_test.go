package rig

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MiniStack's Lambda processes can outlive MiniStack itself: Stop still
// ends what is left of the group once the leader is gone.
func TestStopKillsChildrenThatOutlivedTheLeader(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p, err := StartProcess(ProcessSpec{Name: "test", Argv: []string{"sh", "-c", `sleep 300 & echo $! > ` + pidFile},
		Dir: dir, Env: os.Environ(), LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		p.Stop(time.Second)
		t.Fatal("the leader did not exit")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(time.Second)
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(child, 0) == nil; {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("child %d survived stop", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop(time.Second) // a second Stop is a no-op
}

func TestRunProcess(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	if err := RunProcess(t.Context(), ProcessSpec{Name: "ok", Argv: []string{"sh", "-c", "echo fine"}, Dir: dir, LogPath: log}); err != nil {
		t.Fatalf("RunProcess = %v", err)
	}
	b, _ := os.ReadFile(log)
	if got := string(b); got != "$ sh -c echo fine\nfine\n" {
		t.Fatalf("log = %q, want the command line, then the output", got)
	}

	err := RunProcess(t.Context(), ProcessSpec{Name: "failing step", Argv: []string{"sh", "-c", "echo 'no such package'; exit 2"}, Dir: dir, LogPath: log})
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(err.Error(), "failing step failed") || !strings.Contains(err.Error(), "no such package") {
		t.Fatalf("RunProcess = %v, want the exit status and the log tail", err)
	}

	// A step whose context ends is killed, not waited out: when RunProcess
	// returns, the process it started is gone.
	// The context ends once the step has written its pid, however long
	// that takes.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pidFile := filepath.Join(dir, "slow.pid")
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	err = RunProcess(ctx, ProcessSpec{Name: "slow step", Argv: []string{"sh", "-c", "echo $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + " && exec sleep 300"}, Dir: dir, LogPath: log})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunProcess = %v, want the context's error", err)
	}
	b, err = os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the step's process %d outlived RunProcess (kill -0: %v)", pid, err)
	}
}

func TestTailFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	if got := TailFile(path, 2); !strings.HasPrefix(got, "    (no log: ") {
		t.Fatalf("TailFile(missing) = %q", got)
	}
	long := strings.Repeat("x", 500)
	if err := os.WriteFile(path, []byte("a\nb\n"+long+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := TailFile(path, 2), "    b\n    "+long[:400]+"…"; got != want {
		t.Fatalf("TailFile = %q, want %q", got, want)
	}
}
