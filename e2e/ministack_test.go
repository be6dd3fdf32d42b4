//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/rig"
)

// MiniStackVersion is the pinned MiniStack release (PyPI). It moves fast:
// the gaps in README.md were measured on this one, re-check them on a bump.
// Only MiniStack itself is pinned; pip resolves its dependencies, and the
// install records what it resolved in pip-freeze.txt beside the venv.
const MiniStackVersion = "1.5.33"

// MiniStack's fixed account and our region.
const (
	account = "000000000000"
	region  = "us-east-1"
)

// installMiniStack makes sure the pinned MiniStack is installed in its venv
// and returns the path of its entry point. The marker is written last, so an
// interrupted install is redone rather than taken for a finished one; a lock
// keeps two concurrent runs from installing into the same directory.
func installMiniStack(ctx context.Context, logf func(string, ...any)) (string, error) {
	home, err := rig.DefaultHome() // shared with the emulator rig
	if err != nil {
		return "", err
	}
	dir := filepath.Join(home, "ministack-"+MiniStackVersion)
	bin := filepath.Join(dir, "bin", "ministack")
	marker := filepath.Join(dir, ".installed")
	if _, err := os.Stat(marker); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", home, err)
	}
	unlock, err := rig.LockFile(ctx, filepath.Join(home, "ministack-"+MiniStackVersion+".lock"), nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return bin, nil // another run installed it while we waited
	}

	python := os.Getenv("SAS_RIG_PYTHON")
	if python == "" {
		if python, err = exec.LookPath("python3"); err != nil {
			return "", errors.New("python3 not found on PATH (set SAS_RIG_PYTHON to choose one): MiniStack needs Python 3.10+")
		}
	}
	logf("installing ministack==%s into %s (once per version)", MiniStackVersion, dir)
	begin := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clearing a half-finished install: %w", err)
	}
	// The log lives beside the venv, not in it: the venv is created afresh.
	logPath := filepath.Join(home, "ministack-"+MiniStackVersion+"-install.log")
	_ = os.Remove(logPath)
	env := append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	if err := runProc(ctx, rig.ProcessSpec{Name: "python -m venv", Dir: home, Env: env, LogPath: logPath, Argv: []string{python, "-m", "venv", dir}}); err != nil {
		return "", fmt.Errorf("creating the MiniStack venv (Debian needs python3-venv): %w", err)
	}
	vpython := filepath.Join(dir, "bin", "python")
	if err := runProc(ctx, rig.ProcessSpec{Name: "pip install", Dir: home, Env: env, LogPath: logPath, Argv: []string{vpython, "-m", "pip", "install", "ministack==" + MiniStackVersion}}); err != nil {
		return "", fmt.Errorf("installing MiniStack from PyPI: %w", err)
	}
	freeze, err := exec.CommandContext(ctx, vpython, "-m", "pip", "freeze").Output()
	if err != nil {
		return "", fmt.Errorf("pip freeze: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pip-freeze.txt"), freeze, 0o644); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("pip finished but there is no %s; see %s", bin, logPath)
	}
	if err := os.WriteFile(marker, []byte(MiniStackVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	logf("installed ministack==%s in %s", MiniStackVersion, time.Since(begin).Round(100*time.Millisecond))
	return bin, nil
}

// miniStack is a running MiniStack.
type miniStack struct {
	proc     *rig.Process
	Endpoint string // http://127.0.0.1:<port>
	LogPath  string
}

// startMiniStack starts MiniStack on a free 127.0.0.1 port and waits until it
// answers its health check. Its temporary files (the unpacked bootstraps, its
// PID file) go under runDir, not /tmp.
func startMiniStack(ctx context.Context, bin, runDir string) (*miniStack, error) {
	tmp := filepath.Join(runDir, "ministack-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	var lastErr error
	// The port is free when we look and taken when MiniStack binds; another
	// process can take it in between, so try a few.
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
		env := append(cleanEnv(),
			"BIND_HOST=127.0.0.1",
			"GATEWAY_PORT="+strconv.Itoa(port),
			// The functions' own SDK calls come back here (MiniStack hands
			// its AWS_ENDPOINT_URL to the processes it runs).
			"AWS_ENDPOINT_URL="+endpoint,
			"IOT_MTLS_ENABLED=0",
			"MINISTACK_REGION="+region,
			"TMPDIR="+tmp,
		)
		logPath := filepath.Join(runDir, "ministack.log")
		p, err := startProc(rig.ProcessSpec{Name: "ministack", Dir: runDir, Env: env, LogPath: logPath, Argv: []string{bin}})
		if err != nil {
			return nil, err
		}
		ms := &miniStack{proc: p, Endpoint: endpoint, LogPath: logPath}
		if err := ms.waitHealthy(ctx, 60*time.Second); err != nil {
			p.Stop(5 * time.Second)
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return ms, nil
	}
	return nil, fmt.Errorf("MiniStack did not start: %w", lastErr)
}

func (m *miniStack) waitHealthy(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if m.proc.Exited() {
			return m.proc.ExitError()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint+"/_ministack/health", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ministack on %s did not answer its health check within %s; last lines of %s:\n%s",
				m.Endpoint, within, m.LogPath, rig.TailFile(m.LogPath, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops MiniStack and every Lambda process it runs (they share its
// process group). This is also the only way to tear the stack down: MiniStack
// forgets everything when it stops (state is in memory), while `cdk destroy`
// leaves the resources in place (README.md, gaps).
func (m *miniStack) Stop() { m.proc.Stop(10 * time.Second) }

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv is our environment without any AWS_ variable, so that nothing
// this test starts can pick up a developer's credentials, profile or
// endpoints (or the emulator rig's AWS_ENDPOINT_URL_DYNAMODB) and reach
// anything but MiniStack. The shared config files are pointed at nothing.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	)
}

// awsEnv is cleanEnv pointed at MiniStack with dummy credentials.
func awsEnv(endpoint string) []string {
	return append(cleanEnv(),
		"AWS_ENDPOINT_URL="+endpoint,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION="+region,
		"AWS_DEFAULT_REGION="+region,
	)
}
