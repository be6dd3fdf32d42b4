//go:build e2e

package e2e

import (
	"context"
	"os"

	"github.com/sas-go/sas/internal/dev/rig"
)

// MiniStackVersion is the pinned MiniStack release (rig.MiniStackVersion;
// `make emulator` runs the same one).
const MiniStackVersion = rig.MiniStackVersion

// MiniStack's fixed account and our region.
const (
	account = rig.MiniStackAccount
	region  = rig.Region
)

// installMiniStack makes sure the pinned MiniStack is installed (shared with
// the emulator rig's home) and returns the path of its entry point. Its
// commands are listed in running, so a signal to the test stops them.
func installMiniStack(ctx context.Context, logf func(string, ...any)) (string, error) {
	return rig.InstallMiniStack(ctx, rig.MiniStackOptions{Logf: logf, StartProcess: startProc})
}

// startMiniStack starts MiniStack on a free 127.0.0.1 port and waits until it
// answers its health check. Its temporary files (the unpacked bootstraps, its
// PID file) and its log go under runDir, not /tmp.
//
// Stopping it (Stop) is also the only way to tear the stack down here:
// MiniStack forgets everything when it stops (state is in memory), while the
// rig never runs `cdk destroy` (README.md, gaps).
func startMiniStack(ctx context.Context, bin, runDir string) (*server, error) {
	ms, err := rig.StartMiniStack(ctx, bin, rig.MiniStackOptions{Dir: runDir, StartProcess: startProc})
	if err != nil {
		return nil, err
	}
	return &server{name: "MiniStack " + MiniStackVersion, endpoint: ms.Endpoint, logPath: ms.LogPath, pid: ms.PID(), stop: ms.Stop}, nil
}

// server is the emulator the tests deploy to, whichever it is.
type server struct {
	name              string // "MiniStack 1.5.33"
	endpoint, logPath string
	pid               int
	stop              func() // stops it and every process it started
}

// cleanEnv is our environment without any AWS_ variable (rig.EnvWithoutAWS):
// nothing this test starts can reach anything but MiniStack.
func cleanEnv() []string { return rig.EnvWithoutAWS(os.Environ()) }

// awsEnv is cleanEnv pointed at MiniStack with dummy credentials.
func awsEnv(endpoint string) []string {
	return append(cleanEnv(), rig.MiniStackEnv(endpoint)...)
}
