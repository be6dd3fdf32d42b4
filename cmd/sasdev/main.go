// Command sasdev is `make dev`: the whole system on your machine, for poking
// at (docs/dev.md). It starts DynamoDB Local and ElasticMQ (internal/dev/rig),
// creates the tables and queues (intake, scheduler, one queue per agent of
// the workflows, a status queue for replyTo), runs the scheduler and the
// supervisor in this process on the handlers the Lambda functions run, and
// each agent as its own program (go build, then run it: agent.Start polls
// its queue outside Lambda). Agents the workflows name without a program are
// served by the built-in HTTP agent against a local remote-service
// simulator. It prints the export lines for sasctl and the aws CLI, then a
// line per order as it settles, and stops everything it started on SIGINT
// or SIGTERM, exiting 0.
//
//	sasdev [-workflows FILE] [-agent NAME=DIR]... [-dir .rig/dev]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	webconsole "github.com/sas-go/sas/internal/console"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the dev server with the given arguments until SIGINT or SIGTERM
// and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sasdev:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal takes the default action: the kernel then kills the children (rig.Process)
	}()
	if err := run(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "sasdev:", err)
		return 1
	}
	return 0
}

// agentFlags collects -agent NAME=DIR.
type agentFlags []agentSpec

func (a *agentFlags) String() string {
	parts := make([]string, len(*a))
	for i, s := range *a {
		parts[i] = s.Name + "=" + s.Dir
	}
	return strings.Join(parts, ",")
}

func (a *agentFlags) Set(v string) error {
	name, dir, ok := strings.Cut(v, "=")
	if !ok || name == "" || dir == "" {
		return fmt.Errorf("%q: want NAME=DIR, the agent's name in the workflows and its main package's directory", v)
	}
	for _, s := range *a {
		if s.Name == name {
			return fmt.Errorf("agent %q given twice", name)
		}
	}
	*a = append(*a, agentSpec{Name: name, Dir: dir})
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var agents agentFlags
	fs := flag.NewFlagSet("sasdev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Workflows, "workflows", "", "workflow file (default: "+exampleWorkflows+" when it exists, else the reference workflows)")
	fs.Var(&agents, "agent", "NAME=DIR: run the agent program in DIR (a main package; built with go build in its own module) for the workflows' agent NAME; repeatable (default: the directories under "+exampleAgents+" when the example's workflows are used)")
	fs.StringVar(&o.Dir, "dir", ".rig/dev", "where the logs and the agent binaries go")
	fs.StringVar(&o.Name, "name", "sasdev", "prefix of the tables' and queues' names")
	fs.StringVar(&o.Payload, "payload", "", "payload of the sample order in the printed commands (default: the "+SamplePayloadFile+" beside the workflows file, {\"amount\":42} for the reference workflows, else {})")
	fs.StringVar(&o.ConsoleAddr, "console", webconsole.DefaultAddr, "where the web console listens (loopback; another free port when the default is taken); \"\" for none")
	fs.DurationVar(&o.SupervisorEvery, "supervisor-every", 10*time.Second, "how often the supervisor sweeps (1m when deployed)")
	fs.StringVar(&o.Schedules, "schedules", "", "a schedules file (docs/schedules.md): its runs are sent to the intake as EventBridge Scheduler sends them when deployed")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: sasdev [flags]   (docs/dev.md)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.SupervisorEvery <= 0 {
		return o, errors.New("-supervisor-every: want a positive duration")
	}
	o.Agents = agents
	return o, nil
}
