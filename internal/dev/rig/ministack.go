package rig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MiniStack is the docker-free AWS emulator the CDK stack is deployed to (the
// e2e test, `make emulator`): a Python server that runs CloudFormation,
// Lambda (the bootstraps as host processes), SQS, DynamoDB, EventBridge and
// the rest in one process on one port.
const (
	// MiniStackVersion is the pinned MiniStack release (PyPI). It moves
	// fast: the gaps in e2e/README.md were measured on this one, re-check
	// them on a bump. Only MiniStack itself is pinned; pip resolves its
	// dependencies, and the install records what it resolved in
	// pip-freeze.txt beside the venv.
	MiniStackVersion = "1.5.33"
	// MiniStackAccount is the one account MiniStack serves.
	MiniStackAccount = "000000000000"
)

// MiniStackOptions configure InstallMiniStack and StartMiniStack: a venv
// per version under Home; its log is Dir/ministack.log, and Dir holds its
// temporary files (the unpacked bootstraps, under ministack-tmp).
type MiniStackOptions = EmulatorOptions

// InstallMiniStack makes sure the pinned MiniStack is installed in its venv
// under opts.Home and returns the path of its entry point. The marker is
// written last, so an interrupted install is redone rather than taken for a
// finished one; a lock keeps two concurrent runs from installing into the
// same directory.
func InstallMiniStack(ctx context.Context, opts MiniStackOptions) (string, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return "", err
	}
	home := opts.Home
	dir := filepath.Join(home, "ministack-"+MiniStackVersion)
	bin := filepath.Join(dir, "bin", "ministack")
	marker := filepath.Join(dir, ".installed")
	if fileExists(marker) {
		return bin, nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", home, err)
	}
	unlock, err := LockFile(ctx, filepath.Join(home, "ministack-"+MiniStackVersion+".lock"), nil)
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(marker) {
		return bin, nil // another run installed it while we waited
	}

	python := os.Getenv("SAS_RIG_PYTHON")
	if python == "" {
		if python, err = exec.LookPath("python3"); err != nil {
			return "", errors.New("python3 not found on PATH (set SAS_RIG_PYTHON to choose one): MiniStack needs Python 3.10+")
		}
	}
	opts.Logf("installing ministack==%s into %s (once per version)", MiniStackVersion, dir)
	begin := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clearing a half-finished install: %w", err)
	}
	// The log lives beside the venv, not in it: the venv is created afresh.
	logPath := filepath.Join(home, "ministack-"+MiniStackVersion+"-install.log")
	_ = os.Remove(logPath)
	env := append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	if err := opts.run(ctx, ProcessSpec{Name: "python -m venv", Dir: home, Env: env, LogPath: logPath, Argv: []string{python, "-m", "venv", dir}}); err != nil {
		return "", fmt.Errorf("creating the MiniStack venv (Debian needs python3-venv): %w", err)
	}
	vpython := filepath.Join(dir, "bin", "python")
	if err := opts.run(ctx, ProcessSpec{Name: "pip install", Dir: home, Env: env, LogPath: logPath, Argv: []string{vpython, "-m", "pip", "install", "ministack==" + MiniStackVersion}}); err != nil {
		return "", fmt.Errorf("installing MiniStack from PyPI: %w", err)
	}
	freeze, err := exec.CommandContext(ctx, vpython, "-m", "pip", "freeze").Output()
	if err != nil {
		return "", fmt.Errorf("pip freeze: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pip-freeze.txt"), freeze, 0o644); err != nil {
		return "", err
	}
	if !fileExists(bin) {
		return "", fmt.Errorf("pip finished but there is no %s; see %s", bin, logPath)
	}
	if err := os.WriteFile(marker, []byte(MiniStackVersion+"\n"), 0o644); err != nil {
		return "", err
	}
	opts.Logf("installed ministack==%s in %s", MiniStackVersion, time.Since(begin).Round(100*time.Millisecond))
	return bin, nil
}

// RunningMiniStack is a MiniStack started by StartMiniStack.
type RunningMiniStack struct {
	// Endpoint is its base URL, http://127.0.0.1:<port>: the
	// AWS_ENDPOINT_URL of everything that talks to it.
	Endpoint string
	// LogPath is its log.
	LogPath string
	proc    *Process
}

// PID is MiniStack's process id, which is also its process group's: the
// Lambda processes it spawns are in that group.
func (m *RunningMiniStack) PID() int { return m.proc.PID() }

// Done is closed once MiniStack has ended.
func (m *RunningMiniStack) Done() <-chan struct{} { return m.proc.Done() }

// ExitError describes how MiniStack ended, with the end of its log.
func (m *RunningMiniStack) ExitError() error { return m.proc.ExitError() }

// Stop stops MiniStack and every Lambda process it runs (they share its
// process group). It is also the quickest way to tear a deployed stack down:
// MiniStack forgets everything when it stops (its state is in memory).
func (m *RunningMiniStack) Stop() { m.proc.Stop(10 * time.Second) }

// StartMiniStack starts MiniStack (bin, from InstallMiniStack) on
// 127.0.0.1 and waits until it answers its health check. With opts.Port 0
// it picks a free port, and tries another if one is taken in between.
func StartMiniStack(ctx context.Context, bin string, opts MiniStackOptions) (*RunningMiniStack, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("starting MiniStack: no run directory")
	}
	tmp := filepath.Join(opts.Dir, "ministack-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	var ms *RunningMiniStack
	err = onFreePort(ctx, opts.Port, func(port int) (again bool, err error) {
		if opts.Port != 0 {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				return false, fmt.Errorf("port %d on 127.0.0.1 is taken (another MiniStack?): %w", port, err)
			}
			ln.Close()
		}
		endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
		env := append(EnvWithoutAWS(os.Environ()),
			"BIND_HOST=127.0.0.1",
			"GATEWAY_PORT="+strconv.Itoa(port),
			// The functions' own SDK calls come back here (MiniStack hands
			// its AWS_ENDPOINT_URL to the processes it runs).
			"AWS_ENDPOINT_URL="+endpoint,
			"IOT_MTLS_ENABLED=0",
			"MINISTACK_REGION="+Region,
			"TMPDIR="+tmp,
		)
		logPath := filepath.Join(opts.Dir, "ministack.log")
		p, err := opts.StartProcess(ProcessSpec{Name: "ministack", Dir: opts.Dir, Env: env, LogPath: logPath, Argv: []string{bin}})
		if err != nil {
			return false, err
		}
		ms = &RunningMiniStack{proc: p, Endpoint: endpoint, LogPath: logPath}
		if err := ms.waitHealthy(ctx, 60*time.Second); err != nil {
			p.Stop(5 * time.Second)
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("MiniStack did not start: %w", err)
	}
	return ms, nil
}

func (m *RunningMiniStack) waitHealthy(ctx context.Context, within time.Duration) error {
	return m.proc.WaitHealthy(ctx, m.Endpoint+"/_ministack/health", within)
}

// MiniStackEnv is what a client of a MiniStack at endpoint needs: the
// endpoint, dummy credentials (MiniStack checks no signature, but the SDK and
// the CLIs sign) and the region.
func MiniStackEnv(endpoint string) []string {
	return []string{
		EnvEndpoint + "=" + endpoint,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_REGION=" + Region,
		"AWS_DEFAULT_REGION=" + Region,
	}
}

// EnvWithoutAWS is environ without any AWS_ variable, so that nothing started
// with it can pick up a developer's credentials, profile or endpoints (or
// the emulator rig's AWS_ENDPOINT_URL_DYNAMODB) and reach anything but the
// emulator it is pointed at. The shared config files are pointed at nothing.
func EnvWithoutAWS(environ []string) []string {
	var env []string
	for _, kv := range environ {
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
