// Command sasctl is the operator's command line (see internal/sasctl).
// It reads the same environment variables as the functions, or takes them
// from the deployed stack's outputs (-outputs FILE, -stack NAME; package
// stackenv).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/console"
	"github.com/sas-go/sas/internal/dynamostore"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/stackenv"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sasctl:", err)
		if errors.Is(err, sasctl.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// global are the flags before the command.
type global struct {
	outputs string // a `cdk deploy --outputs-file` file
	stack   string // the stack in it, or, alone, the stack to ask CloudFormation about
}

func parseGlobal(args []string, stderr io.Writer) (global, []string, error) {
	var g global
	fs := flag.NewFlagSet("sasctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&g.outputs, "outputs", "", "take the SAS_* variables from this cdk outputs file (make deploy writes infra/outputs.json)")
	fs.StringVar(&g.stack, "stack", "", "the stack in the -outputs file; alone, read this stack's outputs from CloudFormation")
	fs.Usage = func() { fmt.Fprint(stderr, sasctl.Usage) }
	if err := fs.Parse(args); err != nil {
		return g, nil, fmt.Errorf("%v: %w", err, sasctl.ErrUsage)
	}
	return g, fs.Args(), nil
}

// stackEnv returns the SAS_* variables of the stack g names, or nil when it
// names none.
func stackEnv(ctx context.Context, g global) ([]string, error) {
	var outputs map[string]string
	var err error
	switch {
	case g.outputs != "":
		outputs, err = stackenv.ReadOutputsFile(g.outputs, g.stack)
	case g.stack != "":
		awsCfg, lerr := awsenv.Load(ctx)
		if lerr != nil {
			return nil, lerr
		}
		outputs, err = stackenv.StackOutputs(ctx, cloudformation.NewFromConfig(awsCfg), g.stack)
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return stackenv.Env(outputs)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	g, args, err := parseGlobal(args, os.Stderr)
	if err != nil {
		return err
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, sasctl.Usage)
		return sasctl.ErrUsage
	}
	if args[0] == "workflows" {
		return sasctl.Workflows(ctx, args[1:], stdout)
	}
	env, err := stackEnv(ctx, g)
	if err != nil {
		return err
	}
	if args[0] == "env" {
		if env == nil {
			return fmt.Errorf("env needs -outputs FILE or -stack NAME: %w", sasctl.ErrUsage)
		}
		fmt.Fprintln(stdout, strings.Join(rig.ExportLines(env), "\n"))
		return nil
	}
	// The stack's outputs, when named, win over the environment: they are
	// what the command line asked for.
	getenv := stackenv.Getenv(env, os.Getenv)
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	if err := config.Require(getenv, "SAS_ORDERS_TABLE", "SAS_STATE_TABLE"); err != nil {
		return fmt.Errorf("%w (export them, e.g. eval \"$(sasctl -outputs infra/outputs.json env)\", or pass -outputs or -stack)", err)
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return err
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return err
	}
	queue := sqsqueue.New(sqs.NewFromConfig(awsCfg))
	app := &sasctl.App{
		Store: store, Queue: queue,
		IntakeQueueURL: cfg.IntakeQueueURL, ControlQueueURL: cfg.ControlQueueURL,
		PickupTimeout: cfg.PickupTimeout, Actor: operator(ctx, sts.NewFromConfig(awsCfg)), Out: stdout,
	}
	app.AgentQueues = cfg.AgentQueues
	if lambdaThere(getenv) {
		app.Mappings = sasctl.LambdaMappings{Lambda: lambda.NewFromConfig(awsCfg), QueueARN: queue.QueueARN}
	}
	if args[0] == "console" {
		return serveConsole(ctx, args[1:], cfg, store, queue, app, controlSenders(getenv), stdout)
	}
	return app.Run(ctx, args)
}

// lambdaThere says whether the deployment has Lambda to switch event
// source mappings on: on AWS (no endpoint set), or on an emulator of the
// whole of AWS (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_LAMBDA: MiniStack,
// LocalStack). With only DynamoDB and SQS emulators (make dev, make run)
// the agents' pollers read the pause record themselves.
func lambdaThere(getenv func(string) string) bool {
	if getenv("AWS_ENDPOINT_URL_LAMBDA") != "" || getenv("AWS_ENDPOINT_URL") != "" {
		return true
	}
	return getenv("AWS_ENDPOINT_URL_SQS") == "" && getenv("AWS_ENDPOINT_URL_DYNAMODB") == ""
}

// serveConsole runs the web console (internal/console) until interrupted.
func serveConsole(ctx context.Context, args []string, cfg config.Config, store *dynamostore.Store, queue *sqsqueue.Queue, app *sasctl.App, senders []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	fs.SetOutput(stdout)
	addr := fs.String("addr", console.DefaultAddr, "listen address (loopback unless -remote)")
	readOnly := fs.Bool("read-only", false, "show everything, change nothing")
	remote := fs.Bool("remote", false, "allow an address that is not loopback (needs -tls-cert, -tls-key and -host)")
	certFile := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (required with -remote)")
	keyFile := fs.String("tls-key", "", "the certificate's PEM private key")
	host := fs.String("host", "", "the name browsers reach the console by, besides its address (required with -remote)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, sasctl.ErrUsage)
	}
	reg, err := registry.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return err
	}
	app.Out = io.Discard
	if *remote && *host == "" {
		return fmt.Errorf("console: -remote needs -host, the name browsers reach it by: %w", sasctl.ErrUsage)
	}
	if (*certFile == "") != (*keyFile == "") {
		return fmt.Errorf("console: -tls-cert and -tls-key go together: %w", sasctl.ErrUsage)
	}
	var hosts []string
	if *host != "" {
		hosts = []string{*host}
	}
	srv, err := console.New(console.Config{
		Store: store, Queues: queue, App: app, QueueRefs: console.QueueRefsOf(cfg, reg),
		Agents: console.AgentsOf(reg, cfg), StepAgents: reg.StepAgents(), Registry: reg, Workflows: sortedNames(reg), ReadOnly: *readOnly,
		Hosts: hosts, ControlSenders: senders,
	})
	if err != nil {
		return err
	}
	var l net.Listener
	if *certFile != "" {
		l, err = console.ListenTLS(*addr, *certFile, *keyFile, *remote)
	} else {
		l, err = console.Listen(*addr, *remote)
	}
	if err != nil {
		return err
	}
	// The URL carries the console's secret (docs/console.md): whoever
	// has it acts with these credentials.
	fmt.Fprintf(stdout, "sasctl: the console is at %s (Ctrl-C stops it)\n", srv.LoginURL(console.URL(l, *host)))
	return console.Serve(ctx, l, srv)
}

// controlSenders are the SQS sender ids a console redrive moves control
// messages back from: the supervisor role's (SAS_SUPERVISOR_SENDER_ID,
// the stack's SupervisorRoleId output) and the operators' roles'
// (SAS_CONTROL_SENDERS, comma-separated unique ids, "AROA…").
func controlSenders(getenv func(string) string) []string {
	var out []string
	for _, v := range append([]string{getenv("SAS_SUPERVISOR_SENDER_ID")}, strings.Split(getenv("SAS_CONTROL_SENDERS"), ",")...) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func sortedNames(reg sas.Registry) []string {
	var out []string
	for n := range reg {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// operator is who the history records as acting: the identity AWS
// authenticates the credentials as (STS GetCallerIdentity), not a name the
// operator typed (docs/trust.md). Where STS does not answer (an emulator
// without it), the login name, marked as unverified.
func operator(ctx context.Context, c *sts.Client) string {
	out, err := c.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err == nil && out.Arn != nil && *out.Arn != "" {
		return "operator:" + *out.Arn
	}
	if u, err := user.Current(); err == nil {
		return "operator:" + u.Username + " (unverified)"
	}
	return "operator (unverified)"
}
