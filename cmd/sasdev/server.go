package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/assembly/fromaws"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/rig"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/supervisor"
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
	return s.startConsole(ctx, cfg)
}

// agentsOf is the agents the registry's steps name, sorted.
func agentsOf(reg sas.Registry) []string {
	set := map[string]bool{}
	for _, w := range reg {
		for _, st := range w.Steps {
			set[st.Agent] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// createResources creates the tables and queues and records their names in
// s.env, under the variables the functions read.
func (s *server) createResources(ctx context.Context, base config.Config) error {
	n := s.opts.Name
	s.env = map[string]string{
		"SAS_ORDERS_TABLE": n + "-orders",
		"SAS_STATE_TABLE":  n + "-state",
		"SAS_INDEX_SHARDS": strconv.Itoa(base.IndexShards),
		// The file the functions load; "" for the reference workflows.
		"SAS_WORKFLOWS_FILE": s.opts.Workflows,
		// Every agent has its own queue (SAS_AGENT_QUEUES); there are no
		// priority lanes, alert topic or event bus here.
		"SAS_AGENT_QUEUE_URL": "", "SAS_AGENT_PRIORITY_QUEUE_URL": "",
		"SAS_ALERT_TOPIC_ARN": "", "SAS_EVENT_BUS_NAME": "",
	}
	db := dynamodb.NewFromConfig(s.aws, awsenv.DynamoDBOptions)
	if err := dynamostore.CreateTables(ctx, db, dynamostore.Config{OrdersTable: s.env["SAS_ORDERS_TABLE"], StateTable: s.env["SAS_STATE_TABLE"], Shards: base.IndexShards}); err != nil {
		return err
	}
	create := func(name string, vis time.Duration, dlq bool) (string, error) {
		p := sqsqueue.CreateQueueParams{Name: name, Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(vis.Seconds()))}}
		if dlq {
			p.MaxReceiveCount = sizing.MaxReceiveCount
		}
		q, err := s.queue.CreateQueue(ctx, p)
		return q.URL, err
	}
	var err error
	if s.env["SAS_INTAKE_QUEUE_URL"], err = create(n+"-intake", schedulerVisibility, true); err != nil {
		return err
	}
	if s.env["SAS_SCHEDULER_QUEUE_URL"], err = create(n+"-scheduler", schedulerVisibility, true); err != nil {
		return err
	}
	// Retries and compensations: the supervisor and sasctl send here, and
	// the scheduler takes them from nowhere else (docs/trust.md).
	if s.env["SAS_CONTROL_QUEUE_URL"], err = create(n+"-control", schedulerVisibility, true); err != nil {
		return err
	}
	// A key for this run, held by the in-process scheduler alone: never
	// exported, never given to the agents' processes.
	s.env["SAS_SIGNING_KEY"] = base64.StdEncoding.EncodeToString(sas.NewSigningKey())
	if s.statusURL, err = create(n+"-status", schedulerVisibility, false); err != nil {
		return err
	}
	s.env["SAS_ALLOWED_REPLY_QUEUES"] = s.statusURL

	longest := map[string]time.Duration{}
	for _, w := range s.reg {
		for _, st := range w.Steps {
			longest[st.Agent] = max(longest[st.Agent], st.Timeout)
		}
	}
	s.agentQueues = map[string]string{}
	byAgent := map[string]sas.AgentQueue{}
	for _, a := range agentsOf(s.reg) {
		// As long as the agent's function may run (the SDK's runs stop at
		// the step's deadline; its Poll gives 10 s more on shutdown).
		url, err := create(agentQueueName(n, a), sizing.AgentTimeout(longest[a]), true)
		if err != nil {
			return err
		}
		s.agentQueues[a] = url
		byAgent[a] = sas.AgentQueue{URL: url}
	}
	b, err := json.Marshal(byAgent)
	if err != nil {
		return fmt.Errorf("encoding SAS_AGENT_QUEUES: %w", err)
	}
	s.env["SAS_AGENT_QUEUES"] = string(b)
	return nil
}

// agentQueueName is an agent's queue: SQS allows [A-Za-z0-9_-] and 80
// characters, with room for the dead-letter queue's "-dlq".
func agentQueueName(prefix, agent string) string {
	name := prefix + "-agent-" + strings.ReplaceAll(agent, ".", "_")
	if len(name) > 76 {
		name = name[:76]
	}
	return name
}

// startSimulator serves the remote-service simulator on a free loopback
// port, for the built-in HTTP agents to call (SAS_PAYMENTS_URL).
func (s *server) startSimulator() error {
	sim, err := remotesim.New(remotesim.Config{Seed: uint64(time.Now().UnixNano())})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sim.Close()
		return fmt.Errorf("listening for the simulator: %w", err)
	}
	s.sim, s.simURL = sim, "http://"+ln.Addr().String()
	s.simServer = &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.simServer.Serve(ln) }()
	s.env["SAS_PAYMENTS_URL"] = s.simURL
	return nil
}

// startActors starts the scheduler's pollers, the supervisor's schedule and
// the agents.
func (s *server) startActors(ctx context.Context, cfg config.Config) error {
	schedLog, schedFile, err := s.logger("scheduler.log")
	if err != nil {
		return err
	}
	// Built as functions/scheduler and functions/supervisor build them
	// (internal/assembly, on parts loaded by internal/assembly/fromaws);
	// only the triggers differ: pollers and a ticker.
	owner := "scheduler-" + sas.RandomID(16)
	// Its EMF metric lines go to its log, as the supervisor's below.
	sched, err := s.scheduler(ctx, cfg, schedLog.With("owner", owner), owner, schedFile)
	if err != nil {
		return fmt.Errorf("the scheduler: %w", err)
	}
	supLog, supFile, err := s.logger("supervisor.log")
	if err != nil {
		return err
	}
	// Its EMF metric lines go to its log, as Lambda ships them with the
	// function's stdout.
	sup, err := s.supervisor(cfg, supLog, "supervisor:sasdev-"+sas.RandomID(6), supFile)
	if err != nil {
		return fmt.Errorf("the supervisor: %w", err)
	}
	s.tracker = newTracker(s.con, s.store, sas.IntakeRules{Workflows: s.reg.Has, ReplyToAllowed: cfg.ReplyToAllowed})

	// As the event source mappings feed the scheduler function: two
	// batches in hand per queue.
	for _, q := range []struct {
		name, url string
		intake    bool
	}{{"intake", cfg.IntakeQueueURL, true}, {"scheduler", cfg.SchedulerQueueURL, false}, {"control", cfg.ControlQueueURL, false}} {
		p := &localrun.Poller{
			Name: q.name, Queue: s.queue, QueueURL: q.url, QueueARN: sas.LocalQueueARN(s.aws.Region, q.url),
			BatchSize: 10, Wait: 20 * time.Second, Workers: 2, Handler: s.tracker.observe(sched.Handle, q.intake), Logger: schedLog,
		}
		s.pollersDone.Add(1)
		go func() {
			defer s.pollersDone.Done()
			_ = p.Run(ctx)
		}()
	}
	// As the EventBridge schedule runs the supervisor function.
	s.pollersDone.Add(2)
	go func() {
		defer s.pollersDone.Done()
		localrun.Ticker(ctx, s.opts.SupervisorEvery, func(ctx context.Context) {
			if _, err := sup.Handle(ctx, events.CloudWatchEvent{ID: "sasdev", DetailType: "Scheduled Event", Time: time.Now()}); err != nil && ctx.Err() == nil {
				supLog.Warn("supervisor sweep failed", "err", err)
			}
		})
	}()
	go func() {
		defer s.pollersDone.Done()
		s.tracker.run(ctx)
	}()

	// The built-in agents, as functions/agent builds one: on the same
	// queue client and workflows, each with its own log.
	builtin := assembly.System{Config: cfg, Parts: assembly.Parts{Queue: s.queue, Workflows: s.reg}}
	for _, name := range s.builtin {
		if err := s.procs.startBuiltin(ctx, builtin, name, s.simURL); err != nil {
			return err
		}
	}
	agentEnv := rig.MergeEnv(os.Environ(), []string{
		"SAS_SCHEDULER_QUEUE_URL=" + cfg.SchedulerQueueURL,
		"SAS_AGENT_PRIORITY_QUEUE_URL=", // no lanes here, whatever the shell says
		"AWS_LAMBDA_RUNTIME_API=",       // not in Lambda: agent.Start polls
	})
	for _, a := range s.opts.Agents {
		if err := s.procs.start(ctx, a.Name, rig.MergeEnv(agentEnv, []string{"SAS_AGENT_QUEUE_URL=" + s.agentQueues[a.Name]})); err != nil {
			return err
		}
	}
	return nil
}

// scheduler builds the scheduler's handler as functions/scheduler does.
func (s *server) scheduler(ctx context.Context, cfg config.Config, logger *slog.Logger, owner string, metrics io.Writer) (*scheduler.Handler, error) {
	sys, err := fromaws.System(s.aws, cfg, logger, metrics)
	if err != nil {
		return nil, err
	}
	key, err := fromaws.SigningKey(ctx, s.aws, cfg)
	if err != nil {
		return nil, err
	}
	svc, err := sys.Scheduler(owner, key)
	if err != nil {
		return nil, err
	}
	return scheduler.NewHandler(svc), nil
}

// supervisor builds the supervisor's handler as functions/supervisor does.
func (s *server) supervisor(cfg config.Config, logger *slog.Logger, actor string, metrics io.Writer) (*supervisor.Handler, error) {
	sys, err := fromaws.System(s.aws, cfg, logger, metrics)
	if err != nil {
		return nil, err
	}
	sup, err := sys.Supervisor(actor)
	if err != nil {
		return nil, err
	}
	return supervisor.NewHandler(sup), nil
}

// logger is a JSON logger writing to a file of the log directory, as
// Lambda's would write to CloudWatch.
func (s *server) logger(name string) (*slog.Logger, io.Writer, error) {
	f, err := openLog(filepath.Join(s.opts.Dir, name))
	if err != nil {
		return nil, nil, err
	}
	s.closers = append(s.closers, f)
	return slog.New(slog.NewJSONHandler(f, nil)), f, nil
}

// openLog opens a log file for appending.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening a log: %w", err)
	}
	return f, nil
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

// printUsage prints the export lines and ready commands.
func (s *server) printUsage() {
	var exports []string
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if v := os.Getenv(k); v != "" {
			exports = append(exports, k+"="+v)
		}
	}
	if r := os.Getenv("AWS_REGION"); r != "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		exports = append(exports, "AWS_DEFAULT_REGION="+r) // what version 1 of the aws CLI reads
	}
	for _, k := range exportedVars {
		exports = append(exports, k+"="+s.env[k])
	}
	exports = append(exports, "SAS_STATUS_QUEUE_URL="+s.statusURL)
	if s.simURL != "" {
		exports = append(exports, "SAS_SIM_URL="+s.simURL)
	}
	out := s.con
	out.println("# sasdev: the system's configuration, for sasctl and the aws CLI in another shell")
	for _, l := range rig.ExportLines(exports) {
		out.println(l)
	}

	names := slices.Sorted(maps.Keys(s.reg))
	wf := names[0]
	payload := s.opts.Payload
	if payload == "" {
		payload = "{}"
		if s.opts.Workflows == "" {
			payload = `{"amount":42}`
		} else if b, err := os.ReadFile(filepath.Join(filepath.Dir(s.opts.Workflows), SamplePayloadFile)); err == nil {
			// The workflows' own sample order, beside their file.
			var compact bytes.Buffer
			if json.Compact(&compact, b) == nil {
				payload = compact.String()
			}
		}
	}
	body := fmt.Sprintf(`{"orderId":"order-1","workflow":%q,"payload":%s,"replyTo":%q}`, wf, payload, s.statusURL)
	sqsEndpoint := os.Getenv("AWS_ENDPOINT_URL_SQS")
	if sqsEndpoint == "" {
		sqsEndpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	endpoint := ""
	if sqsEndpoint != "" {
		endpoint = " --endpoint-url " + sqsEndpoint
	}
	out.println("# submit an order (workflows: " + strings.Join(names, ", ") + "), then look at it and at its statuses:")
	out.println("aws sqs send-message" + endpoint + " --queue-url " + s.env["SAS_INTAKE_QUEUE_URL"] + " --message-body " + shellQuote(body))
	// Commands that work from the user's own module, not only in the clone.
	out.println("# sasctl: " + installSasctl())
	out.println("sasctl submit -order order-2 -workflow " + wf + " -payload " + shellQuote(payload) + ` -reply-to "$SAS_STATUS_QUEUE_URL"`)
	out.println("sasctl show order-1")
	out.println("aws sqs receive-message" + endpoint + ` --queue-url "$SAS_STATUS_QUEUE_URL" --max-number-of-messages 10`)
	if s.consoleURL != "" {
		out.println("# the console (docs/console.md): open it in a browser, or go run ./cmd/sasctl console")
		out.println("# console: " + s.consoleURL)
	}
	for _, a := range agentsOf(s.reg) {
		how := "program " + s.rel(s.procs.dirOf(a)) + ", log " + s.rel(filepath.Join(s.opts.Dir, "agent-"+a+".log"))
		if slices.Contains(s.builtin, a) {
			how = "built-in HTTP agent in this process, calling the simulator at " + s.simURL + ", log " + s.rel(filepath.Join(s.opts.Dir, "agent-"+a+".log"))
		}
		s.con.info("agent %s: %s", a, how)
	}
}

// exportedVars are the deployment's variables the server prints as export
// lines (the README's sample shows them; TestREADMEDevSample).
var exportedVars = []string{"SAS_ORDERS_TABLE", "SAS_STATE_TABLE", "SAS_INDEX_SHARDS", "SAS_INTAKE_QUEUE_URL", "SAS_SCHEDULER_QUEUE_URL", "SAS_CONTROL_QUEUE_URL"}

// rel shows a path relative to the working directory when it is under it.
func (s *server) rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
