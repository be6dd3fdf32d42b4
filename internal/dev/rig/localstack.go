package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LocalStack on the host, without Docker (localstack/README.md): the pinned
// localstack-core from PyPI in a venv, its Lambda functions run by our
// process executor (localstack/process-executor), its DynamoDB served by the
// rig's own DynamoDB Local install.
const (
	// LocalStackVersion is the pinned localstack-core release (PyPI).
	LocalStackVersion = "2026.3.0"
	// LocalStackAccount is the account LocalStack serves with the dummy
	// credentials.
	LocalStackAccount = "000000000000"
	// MinLocalStackPython is the oldest Python that runs LocalStackVersion.
	// Its metadata says 3.10, but it imports warnings.deprecated (3.13):
	// 3.11 fails with a SyntaxError, 3.12 with an ImportError.
	MinLocalStackPython = "3.13"
	// EnvLocalStackPython chooses the Python that builds LocalStack's venv.
	EnvLocalStackPython = "SAS_RIG_LOCALSTACK_PYTHON"
)

// localStackPins are what pip installs: localstack-core with its runtime
// extra, and the pins without which its dependencies resolve to versions it
// does not run with (measured on 2026.3.0).
var localStackPins = []string{
	"localstack-core[runtime]==" + LocalStackVersion,
	"cbor2<6",
	"pyopenssl<26",
	"cryptography<47",
	"service_identity",
}

// LocalStackOptions configure InstallLocalStack and StartLocalStack: the
// venv, the executor and the DynamoDB Local layout LocalStack expects go
// under Home; its log is Dir/localstack.log, and Dir holds its
// FILESYSTEM_ROOT and TMPDIR (the unzipped functions).
type LocalStackOptions = EmulatorOptions

// logfWriter adapts a Logf to the io.Writer Options.Log wants.
type logfWriter func(format string, args ...any)

func (f logfWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// RunningLocalStack is a LocalStack started by StartLocalStack.
type RunningLocalStack struct {
	// Endpoint is its base URL, http://127.0.0.1:<port>.
	Endpoint string
	// LogPath is its log, with every function's output.
	LogPath string
	proc    *Process
}

// PID is LocalStack's process id and process group id: DynamoDB Local and
// the function processes it starts are in that group.
func (l *RunningLocalStack) PID() int { return l.proc.PID() }

// Done is closed once LocalStack has ended.
func (l *RunningLocalStack) Done() <-chan struct{} { return l.proc.Done() }

// Stop stops LocalStack with everything it started: its process group
// (the function processes), and its descendants in sessions of their own
// (DynamoDB Local), found before the stop. It keeps its state in memory:
// stopping it forgets every stack.
func (l *RunningLocalStack) Stop() {
	desc := descendants(l.proc.PID())
	l.proc.Stop(10 * time.Second)
	stopStragglers(desc, 3*time.Second)
}

// StartLocalStack starts the installed LocalStack on 127.0.0.1 with the
// process executor, and waits until it answers its health check.
func StartLocalStack(ctx context.Context, inst *LocalStackInstall, opts LocalStackOptions) (*RunningLocalStack, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("starting LocalStack: no run directory")
	}
	root := filepath.Join(opts.Dir, "localstack-fs")
	tmp := filepath.Join(opts.Dir, "localstack-tmp")
	libDir := filepath.Join(root, "var", "lib", "localstack", "lib")
	for _, d := range []string{libDir, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"java", "dynamodb-local"} {
		link := filepath.Join(libDir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(inst.Lib, name), link); err != nil {
			return nil, err
		}
	}
	var ls *RunningLocalStack
	err = onFreePort(ctx, opts.Port, func(port int) (again bool, err error) {
		hostPort := "127.0.0.1:" + strconv.Itoa(port)
		env := append(EnvWithoutAWS(os.Environ()),
			"GATEWAY_LISTEN="+hostPort,
			// The default server (twisted) listens on 0.0.0.0 whatever
			// GATEWAY_LISTEN says.
			"GATEWAY_SERVER=hypercorn",
			// Queue URLs name this address, not localhost.localstack.cloud
			// (which does not resolve here), in AWS's path form
			// /<account>/<name>: "off" does that. ("path" makes them
			// /queue/<region>/<account>/<name>, which the scheduler does
			// not take for a queue at its SDK's endpoint when it checks a
			// replyTo: internal/config ReplyToAllowed.)
			"LOCALSTACK_HOST="+hostPort,
			"SQS_ENDPOINT_STRATEGY=off",
			// Machines with a /.dockerenv are taken for LocalStack's own
			// container otherwise.
			"OVERRIDE_IN_DOCKER=0",
			"FILESYSTEM_ROOT="+root,
			"TMPDIR="+tmp,
			"LAMBDA_RUNTIME_EXECUTOR=process",
			"PYTHONPATH="+inst.Executor,
			// No DNS server (it binds port 53 on all interfaces), no
			// certificate download, no analytics.
			"DNS_ADDRESS=0",
			"SKIP_SSL_CERT_DOWNLOAD=1",
			"DISABLE_EVENTS=1",
			// An idle SQS event source is polled at least every second
			// (default: backs off to 10 s), so a reply is not left waiting.
			"LAMBDA_EVENT_SOURCE_MAPPING_MAX_BACKOFF_ON_EMPTY_POLL_SEC=1",
			"AWS_DEFAULT_REGION="+Region,
		)
		logPath := filepath.Join(opts.Dir, "localstack.log")
		p, err := opts.StartProcess(ProcessSpec{Name: "localstack", Dir: opts.Dir, Env: env, LogPath: logPath,
			Argv: []string{inst.Python, "-m", "localstack.runtime.main"}})
		if err != nil {
			return false, err
		}
		ls = &RunningLocalStack{proc: p, Endpoint: "http://" + hostPort, LogPath: logPath}
		if err := ls.waitHealthy(ctx, 90*time.Second); err != nil {
			p.Stop(5 * time.Second)
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("LocalStack did not start: %w", err)
	}
	return ls, nil
}

func (l *RunningLocalStack) waitHealthy(ctx context.Context, within time.Duration) error {
	return l.proc.WaitHealthy(ctx, l.Endpoint+"/_localstack/health", within)
}
