//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sas-go/sas/internal/dev/rig"
)

// EnvEmulator chooses the emulator the tests deploy to: "ministack" (the
// default) or "localstack" (`make e2e-localstack`): the pinned
// localstack-core on the host, its Lambda functions run as host processes
// by our executor (localstack/README.md). The tests are the same.
const EnvEmulator = "SAS_E2E_EMULATOR"

func useLocalStack() bool { return os.Getenv(EnvEmulator) == "localstack" }

// startLocalStackEmulator installs (once) and starts LocalStack on a free
// 127.0.0.1 port, as startEmulator does MiniStack.
func startLocalStackEmulator(logf func(string, ...any)) (*emulator, error) {
	if v := os.Getenv(EnvEmulator); v != "" && v != "localstack" && v != "ministack" {
		return nil, fmt.Errorf("%s=%q: want ministack or localstack", EnvEmulator, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startupBudget)
	defer cancel()
	runDir, err := os.MkdirTemp("", "sas-e2e-localstack-")
	if err != nil {
		return nil, err
	}
	keptRunDir.Store(runDir)
	em := &emulator{runDir: runDir}
	step := time.Now()
	inst, err := rig.InstallLocalStack(ctx, rig.LocalStackOptions{Logf: logf, StartProcess: startProc})
	if err != nil {
		return nil, fmt.Errorf("installing LocalStack: %w (run directory %s)", err, runDir)
	}
	em.install = time.Since(step).Round(100 * time.Millisecond)
	step = time.Now()
	ls, err := rig.StartLocalStack(ctx, inst, rig.LocalStackOptions{Dir: runDir, StartProcess: startProc})
	if err != nil {
		return nil, fmt.Errorf("starting LocalStack: %w (run directory %s)", err, runDir)
	}
	em.srv = &server{name: "LocalStack " + rig.LocalStackVersion, endpoint: ls.Endpoint, logPath: ls.LogPath, pid: ls.PID(), stop: ls.Stop}
	em.start = time.Since(step).Round(100 * time.Millisecond)
	logf("LocalStack %s on %s (pid %d), log %s; install checked in %s, started in %s",
		rig.LocalStackVersion, em.srv.endpoint, em.srv.pid, em.srv.logPath, em.install, em.start)
	return em, nil
}
