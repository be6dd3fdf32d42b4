//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sas-go/sas/internal/dev/rig"
)

// emulator is the one emulator every test of the run deploys to (MiniStack,
// or LocalStack with SAS_E2E_EMULATOR=localstack), with the run's directory. The first test that asks starts it (sharedEmulator);
// TestMain stops it after the last test, and keeps the run's logs when a
// test failed. Sharing it saves an install check, a start and a `cdk
// bootstrap` per app, and lets the tests run in parallel: the infra test
// spends most of its time waiting for the supervisor's schedule.
type emulator struct {
	srv    *server
	runDir string
	// timings of the install (0 when cached) and the start, for the
	// infra test's summary.
	install, start time.Duration

	// cfnMu keeps CloudFormation changes (bootstrap, deploy) one at a time:
	// MiniStack is one Python process, and the CDK toolkit stack must be
	// there before any deploy.
	cfnMu        sync.Mutex
	bootstrapped bool
}

var (
	sharedOnce sync.Once
	shared     *emulator
	sharedErr  error
)

// startupBudget bounds installing (the first time: venv and pip, 15–40 s)
// and starting MiniStack.
const startupBudget = 5 * time.Minute

// sharedEmulator returns the run's MiniStack, starting it the first time.
// A test that cannot have it fails; none skips.
func sharedEmulator(t *testing.T) *emulator {
	t.Helper()
	sharedOnce.Do(func() {
		if useLocalStack() {
			shared, sharedErr = startLocalStackEmulator(t.Logf)
		} else {
			shared, sharedErr = startEmulator(t.Logf)
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

func startEmulator(logf func(string, ...any)) (*emulator, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startupBudget)
	defer cancel()
	runDir, err := os.MkdirTemp("", "sas-e2e-")
	if err != nil {
		return nil, err
	}
	keptRunDir.Store(runDir)
	em := &emulator{runDir: runDir}
	step := time.Now()
	bin, err := installMiniStack(ctx, logf)
	if err != nil {
		return nil, fmt.Errorf("installing MiniStack: %w (run directory %s)", err, runDir)
	}
	em.install = time.Since(step).Round(100 * time.Millisecond)
	step = time.Now()
	em.srv, err = startMiniStack(ctx, bin, runDir)
	if err != nil {
		return nil, fmt.Errorf("starting MiniStack: %w (run directory %s)", err, runDir)
	}
	em.start = time.Since(step).Round(100 * time.Millisecond)
	logf("MiniStack %s on %s (pid %d), log %s; installed in %s (0 when cached), started in %s",
		MiniStackVersion, em.srv.endpoint, em.srv.pid, em.srv.logPath, em.install, em.start)
	return em, nil
}

// stopSharedEmulator stops MiniStack (with the Lambda processes it runs)
// and removes the run's directory, or, when a test failed, keeps its logs
// and says where they are. TestMain calls it after the tests.
func stopSharedEmulator(failed bool) {
	if shared == nil {
		return
	}
	shared.srv.stop()
	if failed {
		trimRunDir(shared.runDir)
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s (%s; cdk-*.log and outputs.json of the infra stack, travel/ for the example's)\n", shared.runDir, filepath.Base(shared.srv.logPath))
		return
	}
	_ = os.RemoveAll(shared.runDir)
}

// bootstrap runs `cdk bootstrap` the first time it is called, with c's
// assembly (any app's will do: the toolkit stack is per account and
// region); later calls wait for it and return.
func (em *emulator) bootstrap(ctx context.Context, c *cdk) (time.Duration, error) {
	em.cfnMu.Lock()
	defer em.cfnMu.Unlock()
	if em.bootstrapped {
		return 0, nil
	}
	step := time.Now()
	if err := c.bootstrap(ctx); err != nil {
		return 0, err
	}
	em.bootstrapped = true
	return time.Since(step).Round(100 * time.Millisecond), nil
}

// deploy runs c.deploy, one deploy at a time.
func (em *emulator) deploy(ctx context.Context, c *cdk) (map[string]string, error) {
	em.cfnMu.Lock()
	defer em.cfnMu.Unlock()
	return c.deploy(ctx)
}

// awsConfig is an SDK configuration for MiniStack, built by hand, not from
// the environment: whatever AWS_* variables or profiles the caller has, the
// test talks to MiniStack and nothing else.
func (em *emulator) awsConfig() aws.Config {
	return aws.Config{
		Region:                     region,
		Credentials:                credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:               aws.String(em.srv.endpoint),
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
}

// tailOnFailure prints the end of MiniStack's log (every SQS-triggered
// function's output is there) when the test has failed by then.
func (em *emulator) tailOnFailure(t *testing.T) {
	if t.Failed() {
		t.Logf("last lines of %s:\n%s", em.srv.logPath, rig.TailFile(em.srv.logPath, 60))
	}
}

// repoRoot is the repository's root, the parent of this directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// hostLambdaArch is the Lambda architecture of this host: MiniStack runs
// the bootstraps as host processes.
func hostLambdaArch(t *testing.T) string {
	t.Helper()
	arch := map[string]string{"amd64": "x86_64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Fatalf("MiniStack runs the bootstraps as host processes: no Lambda architecture for GOARCH=%s", runtime.GOARCH)
	}
	return arch
}

// cdkCLI is the pinned CDK CLI, which `make e2e` installs (npm ci).
func cdkCLI(t *testing.T, root string) string {
	t.Helper()
	cli := filepath.Join(root, "infra", "node_modules", ".bin", "cdk")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the pinned CDK CLI is not installed in infra/node_modules (%v): run `make e2e`, which runs npm ci", err)
	}
	return cli
}

// requireBootstraps fails the test unless every bootstrap is built for
// this host, dir/<GOARCH>/<fn>/bootstrap; build says how to build them.
func requireBootstraps(t *testing.T, dir, build string, fns ...string) {
	t.Helper()
	for _, fn := range fns {
		p := filepath.Join(dir, runtime.GOARCH, fn, "bootstrap")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("no %s bootstrap for this host (%v): run `make e2e`, which builds them (%s ARCH=%s)", fn, err, build, hostLambdaArch(t))
		}
	}
}
