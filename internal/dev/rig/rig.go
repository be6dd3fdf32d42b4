// Package rig installs and runs the local AWS emulators the tests use:
// DynamoDB Local and, for SQS, ElasticMQ (both from Maven Central) or moto's
// server (from PyPI, SAS_RIG_SQS=moto), on free 127.0.0.1 ports, and gives
// the environment that points the AWS SDK at them (docs/pattern.md §7). cmd/rig wraps it for the command line; other code
// (a local runtime, benchmarks, tests) uses Start directly.
//
// When the environment already names endpoints (AWS_ENDPOINT_URL, for
// LocalStack or MiniStack, or both service endpoints, for an outer rig),
// Start starts nothing and the caller uses those.
package rig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options configure Install and Start. The zero value is ready to use.
type Options struct {
	// Home is where the emulators are installed. Default: $SAS_RIG_HOME,
	// else $HOME/.cache/sas-rig.
	Home string
	// Log receives one-line progress reports. Default: os.Stderr; use
	// io.Discard to silence them.
	Log io.Writer
	// ReadyTimeout bounds how long Start waits for each emulator to answer
	// its first API call. Default: 5 minutes (a cold JVM on a busy 2-core
	// machine has taken 30s, and over 2 minutes at a load average of 20:
	// slow is not broken).
	ReadyTimeout time.Duration
	// IgnoreEnvironment makes Start run its own emulators even when the
	// environment already names endpoints.
	IgnoreEnvironment bool
	// StopGrace is how long Stop waits after SIGTERM before it kills an
	// emulator. Default: 10 seconds. ElasticMQ answers the long polls in
	// progress before it exits (up to their 20 s wait, even when their
	// client has gone); a caller whose emulators hold nothing worth a
	// graceful stop shortens it.
	StopGrace time.Duration
	// SQS names the SQS emulators to run (SQSElasticMQ, SQSMoto): the
	// first serves AWS_ENDPOINT_URL_SQS, the others run beside it for the
	// queue contract suite (EnvSQSExtra). Default: $SAS_RIG_SQS, else
	// ElasticMQ alone.
	SQS []string
}

// DefaultHome is where installs are kept unless Options.Home says otherwise:
// $SAS_RIG_HOME, else $HOME/.cache/sas-rig. The e2e test keeps MiniStack
// there too.
func DefaultHome() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return h, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the rig home (set %s): %w", EnvHome, err)
	}
	return filepath.Join(home, ".cache", "sas-rig"), nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Home == "" {
		home, err := DefaultHome()
		if err != nil {
			return o, err
		}
		o.Home = home
	}
	abs, err := filepath.Abs(o.Home)
	if err != nil {
		return o, fmt.Errorf("rig home %q: %w", o.Home, err)
	}
	o.Home = abs
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if len(o.SQS) == 0 {
		sqs, err := SQSFromEnv()
		if err != nil {
			return o, err
		}
		o.SQS = sqs
	} else if _, err := parseSQS(strings.Join(o.SQS, ",")); err != nil {
		return o, err
	}
	return o, nil
}

// Rig is a set of running emulators, or a note that the environment already
// names endpoints and nothing was started.
type Rig struct {
	// DynamoDBEndpoint and SQSEndpoint are the emulators' base URLs, ""
	// when the rig started nothing. SQSEmulator names what serves
	// SQSEndpoint (SQSElasticMQ, SQSMoto).
	DynamoDBEndpoint string
	SQSEndpoint      string
	SQSEmulator      string
	// ExtraSQS are the other SQS emulators Options.SQS asked for, by name.
	ExtraSQS map[string]string

	external  string
	procs     []*Process
	logDir    string
	stopGrace time.Duration

	stopping  chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	doneOnce  sync.Once
	exitedErr error
}

// Start installs what is missing and starts DynamoDB Local and the SQS
// emulators opts.SQS names, each on a free 127.0.0.1 port, returning once
// all answer API calls. ctx bounds the
// install and the start; the emulators then run until Stop, or until the rig
// process dies (on Linux the kernel kills them then).
//
// If the environment already names endpoints (see the package comment) and
// opts.IgnoreEnvironment is false, Start starts nothing: ExternalReason says
// why and Env is empty.
func Start(ctx context.Context, opts Options) (*Rig, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !opts.IgnoreEnvironment {
		if reason := externalReason(os.Getenv); reason != "" {
			r := newRig()
			r.external = reason
			r.doneOnce.Do(func() { close(r.done) })
			return r, nil
		}
	}
	inst, err := Install(ctx, opts)
	if err != nil {
		return nil, err
	}
	logDir, err := os.MkdirTemp("", "sas-rig-")
	if err != nil {
		return nil, fmt.Errorf("creating the emulator log directory: %w", err)
	}

	specs := []emulatorSpec{dynamoDBLocalSpec(inst)}
	for _, sqs := range opts.SQS {
		switch sqs {
		case SQSElasticMQ:
			specs = append(specs, elasticMQSpec(inst, logDir))
		case SQSMoto:
			specs = append(specs, motoSpec(inst))
		}
	}
	if inst.DynamoDBLocalLauncher == "" {
		fmt.Fprintln(opts.Log, "rig: WARNING: no DynamoDB Local launcher was compiled (no javac at install time): DynamoDB Local listens on all interfaces")
	}

	type result struct {
		p        *Process
		endpoint string
		err      error
	}
	// Start all at once; the first failure cancels the others' start.
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	results := make([]result, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, endpoint, err := startEmulator(startCtx, spec, logDir, opts)
			if err != nil {
				cancelStart()
			}
			results[i] = result{p, endpoint, err}
		}()
	}
	wg.Wait()

	r := newRig()
	r.logDir, r.stopGrace = logDir, opts.StopGrace
	var all, causes []error
	for _, res := range results {
		if res.p != nil {
			r.procs = append(r.procs, res.p)
		}
		if res.err != nil {
			all = append(all, res.err)
			if ctx.Err() != nil || !errors.Is(res.err, context.Canceled) {
				causes = append(causes, res.err) // not merely cancelled by its sibling's failure
			}
		}
	}
	if len(all) > 0 {
		r.stopProcesses()
		if ctx.Err() != nil {
			_ = os.RemoveAll(logDir)
		} // else keep the logs: the error names them
		if len(causes) == 0 {
			causes = all
		}
		return nil, errors.Join(causes...)
	}
	r.DynamoDBEndpoint, r.SQSEndpoint, r.SQSEmulator = results[0].endpoint, results[1].endpoint, opts.SQS[0]
	for i, sqs := range opts.SQS[1:] {
		if r.ExtraSQS == nil {
			r.ExtraSQS = map[string]string{}
		}
		r.ExtraSQS[sqs] = results[i+2].endpoint
	}
	go r.watch()
	return r, nil
}

func newRig() *Rig {
	return &Rig{stopping: make(chan struct{}), done: make(chan struct{})}
}

// ExternalReason says why Start started nothing ("AWS_ENDPOINT_URL=... is
// set"), or "" when the rig runs its own emulators.
func (r *Rig) ExternalReason() string { return r.external }

// Env returns the variables that point the AWS SDK at the emulators
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS, AWS_REGION, dummy
// credentials, SAS_EMULATOR_NAME, and SAS_RIG_SQS_EXTRA when other SQS
// emulators run), or nil when the rig started nothing. Use MergeEnv to lay
// them over os.Environ().
func (r *Rig) Env() []string {
	if r.external != "" || r.DynamoDBEndpoint == "" {
		return nil
	}
	env := buildEnv(r.DynamoDBEndpoint, r.SQSEndpoint, r.SQSEmulator)
	if len(r.ExtraSQS) > 0 {
		env = append(env, EnvSQSExtra+"="+FormatExtraSQS(r.ExtraSQS))
	}
	return env
}

// PIDs returns the process ids of the running emulators.
func (r *Rig) PIDs() []int {
	pids := make([]int, 0, len(r.procs))
	for _, p := range r.procs {
		pids = append(pids, p.PID())
	}
	return pids
}

// LogDir is the directory with the emulators' output; Stop removes it
// unless an emulator died.
func (r *Rig) LogDir() string { return r.logDir }

// Done is closed when the emulators are no longer running: after Stop, or
// when one of them exited on its own (then Err says which and why).
func (r *Rig) Done() <-chan struct{} { return r.done }

// Err reports an emulator that exited on its own; nil otherwise.
func (r *Rig) Err() error {
	select {
	case <-r.done:
		return r.exitedErr
	default:
		return nil
	}
}

// Stop stops the emulators (SIGTERM to each process group, SIGKILL after a
// grace period), waits until they are gone and removes their logs, unless
// one of them had died (Err names its log). It is safe to call more than
// once and on a rig that started nothing.
func (r *Rig) Stop() {
	r.stopOnce.Do(func() {
		close(r.stopping)
		r.stopProcesses()
		r.doneOnce.Do(func() { close(r.done) })
		if r.logDir != "" && r.exitedErr == nil {
			_ = os.RemoveAll(r.logDir)
		}
	})
}

func (r *Rig) stopProcesses() {
	var wg sync.WaitGroup
	for _, p := range r.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Stop(r.stopGrace)
		}()
	}
	wg.Wait()
}

// watch reports the first emulator that exits before Stop.
func (r *Rig) watch() {
	cases := make(chan *Process, len(r.procs))
	for _, p := range r.procs {
		go func() {
			select {
			case <-p.Done():
				cases <- p
			case <-r.stopping:
			}
		}()
	}
	select {
	case p := <-cases:
		select {
		case <-r.stopping:
			return
		default:
		}
		err := p.ExitError()
		r.doneOnce.Do(func() {
			r.exitedErr = err
			close(r.done)
		})
	case <-r.stopping:
	}
}
