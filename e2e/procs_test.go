//go:build e2e

package e2e

import (
	"context"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/dev/rig"
)

// Every process the test starts (rig.StartProcess: its own process group)
// is listed in running until it has been reaped, so that a signal to the
// test (Ctrl-C, a CI timeout) stops all of them, by process group id, before
// it exits: MiniStack takes the Lambda bootstraps it spawned with it (they
// are in its group), cdk takes node and the CDK app.
var running = struct {
	sync.Mutex
	procs map[*rig.Process]bool
}{procs: map[*rig.Process]bool{}}

// startProc starts spec and lists it in running until it ends.
func startProc(spec rig.ProcessSpec) (*rig.Process, error) {
	p, err := rig.StartProcess(spec)
	if err != nil {
		return nil, err
	}
	running.Lock()
	running.procs[p] = true
	running.Unlock()
	go func() {
		<-p.Done()
		running.Lock()
		delete(running.procs, p)
		running.Unlock()
	}()
	return p, nil
}

// runProc runs spec to completion (or until ctx is done, when it is
// stopped). A failure carries the end of its log.
func runProc(ctx context.Context, spec rig.ProcessSpec) error {
	p, err := startProc(spec)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// stopAll stops every process still running; the signal handler and
// TestMain call it.
func stopAll() {
	running.Lock()
	ps := make([]*rig.Process, 0, len(running.procs))
	for p := range running.procs {
		ps = append(ps, p)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(10 * time.Second) }()
	}
	wg.Wait()
}
