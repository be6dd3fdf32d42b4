package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/sqsqueue"
)

// The example the defaults point at (a module of its own, in the repo).
const (
	exampleWorkflows = "examples/travel/workflows.json"
	// SamplePayloadFile, beside a workflows file, is the payload of the
	// sample order the dev server prints.
	SamplePayloadFile = "sample-payload.json"
	exampleAgents     = "examples/travel/agents"
)

// Queue settings are the deployment's (internal/sizing): the same
// receives before the dead-letter queue, and a visibility as long as the
// consuming function may run, so that a request is not handed out again
// while its first run may still go on. Not six times that, as the deployed
// queues: that factor is for Lambda's event source, whose throttled retries
// of a batch may outlast one run; the pollers here have none.
const (
	schedulerVisibility = sizing.SchedulerTimeout
	// emulatorStopGrace is how long the emulators get after SIGTERM.
	emulatorStopGrace = 2 * time.Second
)

type options struct {
	Workflows       string // "" : the reference workflows
	Agents          []agentSpec
	Dir             string
	Name            string
	Payload         string
	SupervisorEvery time.Duration
	Schedules       string // a schedules file (docs/schedules.md); "": none
	ConsoleAddr     string // "" : no console

	agentsFound bool // Agents are the example's directories, not flags
}

// agentSpec is an agent program: the workflows' agent Name, served by the
// main package in Dir.
type agentSpec struct{ Name, Dir string }

// resolve fills in the defaults (the example when it is there, else the
// reference workflows) and returns notes for the console.
func resolve(o options) (options, []string, error) {
	var notes []string
	o.Agents = slices.Clone(o.Agents)
	if o.Workflows == "" {
		if _, err := os.Stat(exampleWorkflows); err == nil {
			o.Workflows = exampleWorkflows
			if len(o.Agents) == 0 {
				found, err := exampleAgentSpecs()
				if err != nil {
					return o, nil, err
				}
				o.Agents, o.agentsFound = found, true
			}
			notes = append(notes, fmt.Sprintf("workflows %s, agent programs under %s", exampleWorkflows, exampleAgents))
		} else {
			notes = append(notes, fmt.Sprintf("no %s here: running the reference workflows (payment, order), whose agent payments is the built-in HTTP agent calling a local simulator", exampleWorkflows))
		}
	}
	if o.Workflows != "" {
		abs, err := filepath.Abs(o.Workflows)
		if err != nil {
			return o, nil, fmt.Errorf("-workflows %s: %w", o.Workflows, err)
		}
		o.Workflows = abs
	}
	for i, a := range o.Agents {
		abs, err := filepath.Abs(a.Dir)
		if err != nil {
			return o, nil, fmt.Errorf("-agent %s=%s: %w", a.Name, a.Dir, err)
		}
		if st, err := os.Stat(abs); err != nil || !st.IsDir() {
			return o, nil, fmt.Errorf("-agent %s=%s: not a directory (want the agent's main package)", a.Name, a.Dir)
		}
		o.Agents[i].Dir = abs
	}
	if o.Dir == "" {
		o.Dir = ".rig/dev"
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, nil, fmt.Errorf("-dir %s: %w", o.Dir, err)
	}
	o.Dir = abs
	return o, notes, nil
}

// exampleAgentSpecs lists the example's agent programs: each directory
// under exampleAgents with Go files serves the agent of its name.
func exampleAgentSpecs() ([]agentSpec, error) {
	entries, err := os.ReadDir(exampleAgents)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing the example's agents: %w", err)
	}
	var out []agentSpec
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(exampleAgents, e.Name())
		if gos, _ := filepath.Glob(filepath.Join(dir, "*.go")); len(gos) > 0 {
			out = append(out, agentSpec{Name: e.Name(), Dir: dir})
		}
	}
	return out, nil
}

// server is a running dev system and what stops it.
type server struct {
	opts  options
	con   *console
	rig   *rig.Rig
	aws   aws.Config
	queue *sqsqueue.Queue
	store *dynamostore.Store
	reg   sas.Registry

	// env is the deployment's configuration, as the CDK stack sets it on
	// the functions; getenv reads it over the process's environment.
	env          map[string]string
	statusURL    string
	agentQueues  map[string]string // agent → its queue
	builtin      []string          // agents served by the built-in HTTP agent
	sim          *remotesim.Sim
	simURL       string
	simServer    *http.Server
	procs        *agentProcs
	tracker      *tracker
	pollersDone  sync.WaitGroup
	closers      []io.Closer // the logs of this process's actors
	emulatorNote string
	consoleURL   string
}

func (s *server) getenv(k string) string {
	if v, ok := s.env[k]; ok {
		return v
	}
	return os.Getenv(k)
}

// run starts everything, prints how to use it, and serves until ctx is
// done; then it stops what it started. An interrupt during the start is
// not an error.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	con := newConsole(stdout, stderr)
	o, notes, err := resolve(o)
	if err != nil {
		return err
	}
	for _, n := range notes {
		con.info("%s", n)
	}
	s := &server{opts: o, con: con}
	defer s.stop()
	err = s.start(ctx)
	if err != nil && ctx.Err() != nil {
		con.info("interrupted while starting: stopping")
		return nil
	}
	if err != nil {
		return err
	}
	s.printUsage()
	con.info("ready; a line per order as it settles below. Logs in %s. Ctrl-C stops everything.", s.rel(o.Dir))
	var died <-chan struct{} // stays nil when the emulators are not ours
	if s.emulatorNote == "" {
		died = s.rig.Done()
	}
	select {
	case <-ctx.Done():
		con.info("stopping")
		return nil
	case <-died:
		return fmt.Errorf("an emulator stopped: %w", s.rig.Err())
	}
}

// start brings the system up.
func (s *server) start(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(s.opts.Dir, "bin"), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", s.opts.Dir, err)
	}
	olds, _ := filepath.Glob(filepath.Join(s.opts.Dir, "*.log")) // the pattern is good
	for _, old := range olds {
		_ = os.Remove(old) // a previous run's: the directory holds this run's logs
	}

	// The workflows, as the functions will load them (SAS_WORKFLOWS_FILE),
	// to know the agents and their queues before anything starts.
	base, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	if s.reg, err = registry.Load(s.opts.Workflows, base.StepTimeout); err != nil {
		return err
	}
	named := agentsOf(s.reg)
	var agents []agentSpec
	for _, a := range s.opts.Agents {
		switch {
		case slices.Contains(named, a.Name):
			agents = append(agents, a)
		case s.opts.agentsFound:
			s.con.info("%s: no step of the workflows names agent %q; not running it", s.rel(a.Dir), a.Name)
		default:
			return fmt.Errorf("-agent %s: no step of the workflows names agent %q (they name: %s)", a.Name, a.Name, strings.Join(named, ", "))
		}
	}
	s.opts.Agents = agents
	for _, n := range named {
		if !slices.ContainsFunc(s.opts.Agents, func(a agentSpec) bool { return a.Name == n }) {
			s.builtin = append(s.builtin, n)
		}
	}

	// The emulators start while the agent programs build.
	type started struct {
		r   *rig.Rig
		err error
	}
	rigc := make(chan started, 1)
	go func() {
		// The emulators are in memory and about to be thrown away: no
		// need to wait for ElasticMQ to answer the long polls in progress.
		r, err := rig.Start(ctx, rig.Options{Log: s.con.stderr, StopGrace: emulatorStopGrace})
		rigc <- started{r, err}
	}()
	s.procs = newAgentProcs(s.con, s.opts.Dir, s.rel)
	buildErr := s.procs.build(ctx, s.opts.Agents)
	st := <-rigc
	s.rig = st.r
	if st.err != nil {
		return fmt.Errorf("starting the emulators: %w", errors.Join(st.err, buildErr))
	}
	if buildErr != nil {
		return buildErr
	}
	if why := s.rig.ExternalReason(); why != "" {
		s.emulatorNote = why
		s.con.info("%s: using those endpoints, starting no emulators", why)
	}
	// The SDK of this process and of the agents reads the endpoints, region
	// and credentials from the environment.
	for _, kv := range s.rig.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{"AWS_REGION": rig.Region, "AWS_ACCESS_KEY_ID": rig.AccessKeyID, "AWS_SECRET_ACCESS_KEY": rig.SecretAccessKey} {
		if os.Getenv(k) == "" && (k != "AWS_REGION" || os.Getenv("AWS_DEFAULT_REGION") == "") {
			_ = os.Setenv(k, v)
		}
	}
	if s.aws, err = awsenv.Load(ctx); err != nil {
		return err
	}
	s.queue = sqsqueue.New(sqs.NewFromConfig(s.aws))

	if err := s.createResources(ctx, base); err != nil {
		return err
	}
	if len(s.builtin) > 0 {
		if err := s.startSimulator(); err != nil {
			return err
		}
	}
	scheds, err := s.loadSchedules() // schedules.go
	if err != nil {
		return err
	}
	cfg, err := config.Load(s.getenv)
	if err != nil {
		return err
	}
	if s.store, err = dynamostore.FromConfig(s.aws, cfg); err != nil {
		return err
	}
	if err := s.startActors(ctx, cfg); err != nil {
		return err
	}
	s.startSchedules(ctx, scheds, cfg.IntakeQueueURL)
	return s.startConsole(ctx, cfg)
}

// agentsOf is the agents the registry's steps name, sorted.
func agentsOf(reg sas.Registry) []string {
	set := map[string]bool{}
	for _, w := range reg {
		for _, st := range w.Steps {
			if !st.Outside() { // a callback step has no agent
				set[st.Agent] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// stop stops what start started, in the reverse order: the agents, the
// scheduler's pollers and the supervisor, the simulator, the emulators.
func (s *server) stop() {
	if s.procs != nil {
		s.procs.stopAll()
	}
	s.pollersDone.Wait()
	if s.simServer != nil {
		_ = s.simServer.Close()
		s.sim.Close()
	}
	for _, c := range s.closers {
		_ = c.Close()
	}
	if s.rig != nil {
		s.rig.Stop()
		if s.emulatorNote == "" {
			s.con.info("stopped the agents, the scheduler, the supervisor and the emulators")
		} else {
			s.con.info("stopped the agents, the scheduler and the supervisor")
		}
	}
}
