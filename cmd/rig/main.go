// Command rig installs and runs the local AWS emulators the tests use
// (DynamoDB Local, and ElasticMQ or moto for SQS; see internal/dev/rig and
// docs/pattern.md §7).
//
//	rig exec -- CMD [ARGS...]  start the emulators, run CMD with the AWS SDK
//	                           pointed at them, stop them, exit with CMD's status
//	rig up                     start them, print export lines, run until
//	                           SIGINT/SIGTERM
//	rig install                install them (pinned versions) and exit
//	rig ministack [-port N]    start MiniStack (the emulator the CDK stack
//	                           deploys to), print export lines, run until
//	                           SIGINT/SIGTERM
//	rig localstack [-port N] [-- CMD [ARGS...]]
//	                           start LocalStack on the host (no Docker; its
//	                           Lambda functions as host processes,
//	                           localstack/README.md); with CMD, run it
//	                           against LocalStack and exit with its status,
//	                           else print export lines and run until
//	                           SIGINT/SIGTERM
//
// Installs go to $SAS_RIG_HOME (default ~/.cache/sas-rig). When
// AWS_ENDPOINT_URL is set (LocalStack, MiniStack) exec starts nothing and
// runs CMD as it is.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sas-go/sas/internal/dev/rig"
)

const usage = `usage:
  rig exec [--] CMD [ARGS...]   run CMD against fresh emulators; exit with its status
  rig up                        start the emulators, print export lines, run until Ctrl-C
  rig install                   install the pinned emulators and exit
  rig ministack [-port 4566] [-dir DIR]
                                start MiniStack ` + rig.MiniStackVersion + ` (PyPI) on 127.0.0.1 for a CDK deploy
                                (docs/deploy.md), print export lines, run until Ctrl-C
  rig localstack [-port 4566] [-dir DIR] [-- CMD [ARGS...]]
                                start LocalStack ` + rig.LocalStackVersion + ` (PyPI, Python ` + rig.MinLocalStackPython + `+) on 127.0.0.1
                                without Docker (localstack/README.md); with CMD, run it against
                                LocalStack, stop it, exit with CMD's status; else print export
                                lines and run until Ctrl-C

DynamoDB Local ` + rig.DynamoDBLocalVersion + ` and ElasticMQ ` + rig.ElasticMQVersion + ` (Maven Central) serve DynamoDB and SQS;
SAS_RIG_SQS=moto serves SQS with moto ` + rig.MotoVersion + ` (PyPI) instead, and SAS_RIG_SQS=elasticmq,moto
runs both (the second for the queue contract suite, named in SAS_RIG_SQS_EXTRA). They are
installed into $SAS_RIG_HOME (default ~/.cache/sas-rig), MiniStack too. If AWS_ENDPOINT_URL
is set, exec and up start nothing.
`

func main() {
	log.SetFlags(0)
	log.SetPrefix("rig: ")
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	var err error
	switch os.Args[1] {
	case "exec":
		code, err = runExec(os.Args[2:])
	case "up":
		code, err = runUp()
	case "install":
		code, err = runInstall()
	case "ministack":
		code, err = runMiniStack(os.Args[2:])
	case "localstack":
		code, err = runLocalStack(os.Args[2:])
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "rig: unknown command %q\n%s", os.Args[1], usage)
		code = 2
	}
	if err != nil {
		log.Print(err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// runExec starts the emulators, runs the command and returns its exit code.
// A first SIGINT/SIGTERM is passed on to the command (or cancels the start);
// a second one kills the command. The emulators are stopped in every case.
func runExec(args []string) (int, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2, errors.New("exec: no command given")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		child   *os.Process
		signals int
	)
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	go func() {
		for s := range sigc {
			mu.Lock()
			signals++
			cancel()
			switch {
			case child == nil:
			case signals == 1:
				// A terminal's Ctrl-C already reached the command (it
				// shares our process group); a kill aimed at the rig
				// alone did not, so pass it on either way.
				_ = child.Signal(s)
			default:
				fmt.Fprintf(os.Stderr, "rig: %v again: killing %s\n", s, args[0])
				_ = child.Kill()
			}
			mu.Unlock()
		}
	}()

	r, status, err := startRig(ctx)
	if err != nil {
		return status, err
	}
	defer r.Stop()
	if reason := r.ExternalReason(); reason != "" {
		fmt.Fprintf(os.Stderr, "rig: %s: starting no emulators, running %s against those endpoints\n", reason, args[0])
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = rig.MergeEnv(os.Environ(), r.Env())
	mu.Lock()
	if ctx.Err() != nil {
		mu.Unlock()
		return 130, errors.New("interrupted before the command started")
	}
	if err := cmd.Start(); err != nil {
		mu.Unlock()
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		fmt.Fprintf(os.Stderr, "rig: %v\n", err)
		return code, nil
	}
	child = cmd.Process
	mu.Unlock()

	code := exitCode(cmd.Wait())
	if err := r.Err(); err != nil {
		// The command ran against a broken rig: never report that as a
		// success.
		fmt.Fprintf(os.Stderr, "rig: an emulator died while %s ran: %v\n", args[0], err)
		if code == 0 {
			code = 1
		}
	}
	r.Stop()
	return code, nil
}

// startRig starts the emulators; on failure it returns the exit status to
// end with: 130 when a signal cancelled ctx, else 1.
func startRig(ctx context.Context) (*rig.Rig, int, error) {
	r, err := rig.Start(ctx, rig.Options{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, 130, fmt.Errorf("interrupted while starting the emulators: %w", err)
		}
		return nil, 1, fmt.Errorf("starting the emulators: %w", err)
	}
	return r, 0, nil
}

// exitCode maps a command's end to a shell-style exit status.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "rig: %v\n", err)
	return 1
}

// runUp starts the emulators, prints the environment as export lines on
// stdout (for eval or copying) and runs until SIGINT/SIGTERM, or exits
// non-zero if an emulator dies.
func runUp() (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r, status, err := startRig(ctx)
	if err != nil {
		return status, err
	}
	defer r.Stop()
	if reason := r.ExternalReason(); reason != "" {
		fmt.Fprintf(os.Stderr, "rig: %s: starting no emulators\n", reason)
		return 0, nil
	}
	fmt.Println(strings.Join(rig.ExportLines(r.Env()), "\n"))
	fmt.Fprintf(os.Stderr, "rig: emulators running (pids %v, logs in %s); Ctrl-C or SIGTERM stops them\n", r.PIDs(), r.LogDir())
	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "rig: stopping the emulators")
		r.Stop()
		return 0, nil
	case <-r.Done():
		err := r.Err()
		r.Stop()
		return 1, err
	}
}

func runInstall() (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	opts := rig.Options{}
	sqsList, err := rig.SQSFromEnv()
	if err != nil {
		return 2, err
	}
	opts.SQS = sqsList
	inst, err := rig.Install(ctx, opts)
	if err != nil {
		return 1, fmt.Errorf("install: %w", err)
	}
	fmt.Printf("DynamoDB Local %s: %s\n", rig.DynamoDBLocalVersion, inst.DynamoDBLocalLib)
	for _, sqs := range opts.SQS {
		switch sqs {
		case rig.SQSElasticMQ:
			fmt.Printf("ElasticMQ %s: %s\n", rig.ElasticMQVersion, inst.ElasticMQLib)
		case rig.SQSMoto:
			fmt.Printf("moto %s: %s\n", rig.MotoVersion, inst.MotoServer)
		}
	}
	fmt.Fprintf(os.Stderr, "rig: installed in %s (took %s)\n", inst.Home, time.Since(begin).Round(100*time.Millisecond))
	return 0, nil
}

// runMiniStack installs and starts MiniStack, the emulator a newcomer
// deploys the CDK stack to (docs/deploy.md), prints the export lines that
// point the CLIs and the SDK at it on stdout, and runs until SIGINT/SIGTERM,
// when it stops MiniStack and the Lambda processes it spawned. Unlike up and
// exec it starts MiniStack even when AWS_ENDPOINT_URL is set: that is what
// the printed lines set, and MiniStack gets a clean environment anyway.
func runMiniStack(args []string) (int, error) {
	fs := flag.NewFlagSet("rig ministack", flag.ContinueOnError)
	port := fs.Int("port", 4566, "127.0.0.1 port to serve on (0: a free one)")
	dir := fs.String("dir", "", "run directory for its log and unpacked functions (default: a new one under $TMPDIR)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runDir, err := runDirectory(*dir, "sas-ministack-")
	if err != nil {
		return 1, err
	}
	opts := rig.MiniStackOptions{Dir: runDir, Port: *port, Logf: log.Printf}
	bin, err := rig.InstallMiniStack(ctx, opts)
	if err != nil {
		return 1, fmt.Errorf("installing MiniStack: %w", err)
	}
	ms, err := rig.StartMiniStack(ctx, bin, opts)
	if err != nil {
		return 1, err
	}
	defer ms.Stop()
	fmt.Println(strings.Join(rig.ExportLines(rig.MiniStackEnv(ms.Endpoint)), "\n"))
	log.Printf("MiniStack %s on %s (pid %d; this rig is pid %d), log %s", rig.MiniStackVersion, ms.Endpoint, ms.PID(), os.Getpid(), ms.LogPath)
	log.Printf("state is in memory: stopping it forgets every stack. Ctrl-C or `kill %d` stops it", os.Getpid())
	select {
	case <-ctx.Done():
		log.Print("stopping MiniStack")
		ms.Stop()
		// The unpacked bootstraps are bulky; the log stays.
		_ = os.RemoveAll(filepath.Join(runDir, "ministack-tmp"))
		return 0, nil
	case <-ms.Done():
		return 1, ms.ExitError()
	}
}

// runLocalStack installs and starts LocalStack on the host. With a command
// after the flags it runs that command with the SDK pointed at LocalStack
// (and SAS_EMULATOR_NAME naming it, for the contract suites' quirks), then
// stops LocalStack and exits with the command's status; without one it
// prints the export lines and runs until SIGINT/SIGTERM, like ministack.
func runLocalStack(args []string) (int, error) {
	fs := flag.NewFlagSet("rig localstack", flag.ContinueOnError)
	port := fs.Int("port", 4566, "127.0.0.1 port to serve on (0: a free one); with a command, default 0")
	dir := fs.String("dir", "", "run directory for its log, FILESYSTEM_ROOT and unzipped functions (default: a new one under $TMPDIR, removed on a clean stop)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	command := fs.Args()
	portSet := false
	fs.Visit(func(f *flag.Flag) { portSet = portSet || f.Name == "port" })
	if len(command) > 0 && !portSet {
		*port = 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runDir, err := runDirectory(*dir, "sas-localstack-")
	if err != nil {
		return 1, err
	}
	opts := rig.LocalStackOptions{Dir: runDir, Port: *port, Logf: log.Printf}
	inst, err := rig.InstallLocalStack(ctx, opts)
	if err != nil {
		return 1, fmt.Errorf("installing LocalStack: %w", err)
	}
	ls, err := rig.StartLocalStack(ctx, inst, opts)
	if err != nil {
		return 1, err
	}
	defer ls.Stop()
	env := rig.MiniStackEnv(ls.Endpoint) // the same variables: endpoint, dummy credentials, region
	log.Printf("LocalStack %s on %s (pid %d; this rig is pid %d), log %s", rig.LocalStackVersion, ls.Endpoint, ls.PID(), os.Getpid(), ls.LogPath)
	clean := func() {
		ls.Stop()
		// FILESYSTEM_ROOT and the unzipped functions are bulky; the log stays.
		_ = os.RemoveAll(filepath.Join(runDir, "localstack-fs"))
		_ = os.RemoveAll(filepath.Join(runDir, "localstack-tmp"))
	}
	if len(command) > 0 {
		cmd := exec.CommandContext(ctx, command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		var base []string
		for _, kv := range rig.EnvWithoutAWS(os.Environ()) {
			if !strings.HasPrefix(kv, rig.EnvSQSExtra+"=") && !strings.HasPrefix(kv, "SAS_EMULATOR_NAME=") {
				base = append(base, kv) // an outer rig's emulators are not LocalStack's
			}
		}
		cmd.Env = append(base, append(env, "SAS_EMULATOR_NAME=localstack-"+rig.LocalStackVersion)...)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		clean()
		if err == nil && *dir == "" {
			_ = os.RemoveAll(runDir)
		} else {
			log.Printf("LocalStack's log kept: %s", ls.LogPath)
		}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return exit.ExitCode(), nil
		case err != nil:
			return 1, err
		}
		return 0, nil
	}
	fmt.Println(strings.Join(rig.ExportLines(env), "\n"))
	log.Printf("state is in memory: stopping it forgets every stack. Ctrl-C or `kill %d` stops it", os.Getpid())
	select {
	case <-ctx.Done():
		log.Print("stopping LocalStack")
		clean()
		return 0, nil
	case <-ls.Done():
		return 1, errors.New("LocalStack ended by itself; see " + ls.LogPath)
	}
}

// runDirectory is dir, made if missing, or a new directory under $TMPDIR
// named from prefix when dir is "".
func runDirectory(dir, prefix string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", prefix)
	}
	return dir, os.MkdirAll(dir, 0o755)
}
