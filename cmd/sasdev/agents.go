package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/dev/rig"
)

// How agent programs are stopped and restarted.
const (
	// agentStopGrace is how long an agent has after SIGTERM: the SDK's
	// Poll gives the batches in hand 10 s.
	agentStopGrace = 15 * time.Second
	// restartMax caps the wait before an agent that exited is started
	// again; the wait doubles from a second while it keeps exiting.
	restartMax = 30 * time.Second
	// healthyRun is how long an agent must run for its restart wait to
	// start again from a second.
	healthyRun = time.Minute
)

// agentProcs runs the agents: each agent program as a process of its own
// (rig.StartProcess: its own process group, killed by the kernel if this
// process dies), started again when it exits on its own, as the platform
// would; and the built-in HTTP agents in this process.
type agentProcs struct {
	con *console
	dir string // logs, and the binaries under bin/
	rel func(string) string

	mu       sync.Mutex
	dirs     map[string]string // agent → its main package's directory
	bins     map[string]string // agent → its binary
	running  map[string]*rig.Process
	stopping chan struct{}
	stopOnce sync.Once
	cancels  []context.CancelFunc // of the built-in agents' Poll
	wg       sync.WaitGroup

	// An operator's pause (docs/console.md): a paused agent program is
	// stopped and not restarted until the resume; a paused built-in
	// agent's Poll is stopped and started again.
	paused   map[string]bool
	builtins map[string]*builtinPoll
}

// builtinPoll is a built-in agent's polling, stoppable for a pause.
type builtinPoll struct {
	ctx    context.Context
	h      *agent.Handler
	cancel context.CancelFunc
	done   chan struct{}
}

func newAgentProcs(con *console, dir string, rel func(string) string) *agentProcs {
	return &agentProcs{con: con, dir: dir, rel: rel, dirs: map[string]string{}, bins: map[string]string{},
		running: map[string]*rig.Process{}, stopping: make(chan struct{}), paused: map[string]bool{}, builtins: map[string]*builtinPoll{}}
}

func (a *agentProcs) logPath(name string) string {
	return filepath.Join(a.dir, "agent-"+name+".log")
}

func (a *agentProcs) dirOf(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dirs[name]
}

// build builds each agent program with go build, run in the package's
// directory so that the module it belongs to (the example is a module of
// its own) is the one used. The output goes to the agent's log.
func (a *agentProcs) build(ctx context.Context, specs []agentSpec) error {
	for _, s := range specs {
		bin := filepath.Join(a.dir, "bin", s.Name)
		begin := time.Now()
		err := rig.RunProcess(ctx, rig.ProcessSpec{
			Name: "go build (agent " + s.Name + ")", Argv: []string{"go", "build", "-o", bin, "."},
			Dir: s.Dir, LogPath: a.logPath(s.Name),
		})
		if err != nil {
			return fmt.Errorf("building agent %s in %s: %w", s.Name, s.Dir, err)
		}
		a.mu.Lock()
		a.dirs[s.Name], a.bins[s.Name] = s.Dir, bin
		a.mu.Unlock()
		a.con.info("built agent %s from %s in %s", s.Name, a.rel(s.Dir), time.Since(begin).Round(100*time.Millisecond))
	}
	return nil
}

// start runs the built agent program name with env, and keeps it running
// until stopAll.
func (a *agentProcs) start(ctx context.Context, name string, env []string) error {
	p, err := a.spawn(name, env)
	if err != nil {
		return err
	}
	a.wg.Add(1)
	go a.keep(ctx, name, env, p)
	return nil
}

func (a *agentProcs) spawn(name string, env []string) (*rig.Process, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.stopping:
		return nil, fmt.Errorf("agent %s: stopping", name)
	default:
	}
	p, err := rig.StartProcess(rig.ProcessSpec{
		Name: "agent " + name, Argv: []string{a.bins[name]}, Dir: a.dirs[name], Env: env, LogPath: a.logPath(name),
	})
	if err != nil {
		return nil, err
	}
	a.running[name] = p
	a.con.info("started agent %s (pid %d)", name, p.PID())
	return p, nil
}

// keep starts the agent again when it exits on its own, after a wait that
// grows while it keeps exiting.
func (a *agentProcs) keep(ctx context.Context, name string, env []string, p *rig.Process) {
	defer a.wg.Done()
	wait := time.Second
	for {
		began := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-a.stopping:
			return
		case <-p.Done():
		}
		if a.waitWhilePaused(ctx, name) {
			next, err := a.spawn(name, env)
			if err != nil {
				a.con.info("agent %s: %v", name, err)
				return
			}
			p, wait = next, time.Second
			continue
		}
		if time.Since(began) > healthyRun {
			wait = time.Second
		}
		a.con.info("agent %s exited (%v); starting it again in %s. Last lines of %s:\n%s",
			name, p.ExitError(), wait, a.logPath(name), rig.TailFile(a.logPath(name), 10))
		select {
		case <-ctx.Done():
			return
		case <-a.stopping:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, restartMax)
		next, err := a.spawn(name, env)
		if err != nil {
			a.con.info("agent %s: %v", name, err)
			return
		}
		p = next
	}
}

// startBuiltin serves agent name with the built-in HTTP agent in this
// process, hosted by the assembly as functions/agent hosts it, calling
// baseURL; its handler polls the agent's queue (agent.Handler.Poll) until
// stopAll.
func (a *agentProcs) startBuiltin(ctx context.Context, sys assembly.System, name, baseURL string) error {
	f, err := openLog(a.logPath(name))
	if err != nil {
		return err
	}
	// Its log and its EMF lines in its log file, as Lambda ships stdout.
	sys = sys.WithLog(slog.New(slog.NewJSONHandler(f, nil)), f)
	h, err := sys.BuiltinAgent(builtinagent.Deps{Name: name, BaseURL: baseURL,
		AllowHTTP: true}, assembly.Hosting{}) // make dev: a local service or an emulator
	if err != nil {
		_ = f.Close()
		return err
	}
	a.mu.Lock()
	a.builtins[name] = &builtinPoll{ctx: ctx, h: h}
	a.pollBuiltinLocked(name)
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		<-ctx.Done()
		a.mu.Lock()
		b := a.builtins[name]
		a.mu.Unlock()
		if b.done != nil {
			<-b.done
		}
		_ = f.Close()
	}()
	return nil
}

// pollBuiltinLocked starts a built-in agent's Poll.
func (a *agentProcs) pollBuiltinLocked(name string) {
	b := a.builtins[name]
	pctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	b.cancel, b.done = cancel, done
	a.cancels = append(a.cancels, cancel)
	go func() {
		defer close(done)
		_ = b.h.Poll(pctx)
	}()
}

// setPaused applies an operator's pause or resume of an agent: its
// program is stopped (SIGTERM: the batches in hand finish) and started
// again on the resume; a built-in agent's Poll likewise.
func (a *agentProcs) setPaused(name string, paused bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paused[name] == paused {
		return
	}
	a.paused[name] = paused
	if b, ok := a.builtins[name]; ok {
		if paused {
			b.cancel()
		} else {
			a.pollBuiltinLocked(name)
		}
	}
	if p, ok := a.running[name]; ok && paused {
		go p.Stop(agentStopGrace)
	}
	if paused {
		a.con.info("agent %s paused: stopped polling its queue", name)
	} else {
		a.con.info("agent %s resumed", name)
	}
}

// waitWhilePaused waits, after an agent program exited, while the agent is
// paused; it reports whether it was (the exit was the pause's).
func (a *agentProcs) waitWhilePaused(ctx context.Context, name string) bool {
	was := false
	for {
		a.mu.Lock()
		paused := a.paused[name]
		a.mu.Unlock()
		if !paused {
			return was
		}
		was = true
		select {
		case <-ctx.Done():
			return false
		case <-a.stopping:
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// stopAll stops every agent: SIGTERM to each program's process group
// (SIGKILL after agentStopGrace), and the built-in agents' polling; it
// returns when all are gone.
func (a *agentProcs) stopAll() {
	a.stopOnce.Do(func() {
		a.mu.Lock()
		close(a.stopping)
		procs := make(map[string]*rig.Process, len(a.running))
		for n, p := range a.running {
			procs[n] = p
		}
		for _, c := range a.cancels {
			c()
		}
		a.mu.Unlock()
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.Stop(agentStopGrace)
			}()
		}
		wg.Wait()
		a.wg.Wait()
	})
}
