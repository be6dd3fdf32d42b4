package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// The dev server as a user runs it: built, started with a workflow file
// whose steps are done by an agent program (testdata/echoagent, built and
// run by the server) and by the built-in HTTP agent (against the
// simulator). It starts its own emulators (the test hides the ones `make
// test` started), prints the export lines, shows a line per order as it
// settles (one submitted with sasctl's code, one that fails and is
// compensated, one refused, one a schedule's run), and on SIGINT stops every process it started
// and exits 0.
func TestDevServer(t *testing.T) {
	emulator.Require(t) // the convention for tests that need the rig; the server starts its own
	dir := t.TempDir()
	bin := filepath.Join(dir, "sasdev")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	cmd := exec.Command(bin, "-workflows", "testdata/workflows.json", "-agent", "echo=./testdata/echoagent",
		"-dir", filepath.Join(dir, "dev"), "-supervisor-every", "2s", "-schedules", "testdata/schedules.json")
	cmd.Env = withoutEndpoints(os.Environ())
	stdout, stderr := &lines{}, &lines{}
	stdoutPipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderrPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); stdout.read(stdoutPipe) }()
	go func() { defer readers.Done(); stderr.read(stderrPipe) }()
	exited := make(chan error, 1)
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill() // its children die with it (rig.Process)
				<-exited
			}
		}
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	})

	// Bounds, not timings: the agent's build and the emulators' cold JVMs
	// have taken over 3 minutes together at a load average of 20.
	stderr.waitFor(t, regexp.MustCompile(`^sasdev: ready`), 8*time.Minute, exited)
	// stdout is another pipe, read by another goroutine: wait for its last
	// printed line too before reading the export lines above it.
	stdout.waitFor(t, regexp.MustCompile(`^aws sqs receive-message `), 3*time.Minute, exited)
	exports := map[string]string{}
	for _, l := range stdout.all() {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			exports[k] = v
		}
	}
	for _, k := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_REGION", "SAS_ORDERS_TABLE", "SAS_STATE_TABLE",
		"SAS_INTAKE_QUEUE_URL", "SAS_SCHEDULER_QUEUE_URL", "SAS_STATUS_QUEUE_URL"} {
		require.NotEmpty(t, exports[k], "export %s", k)
	}
	require.NotEqual(t, os.Getenv("AWS_ENDPOINT_URL_SQS"), exports["AWS_ENDPOINT_URL_SQS"], "its own emulators")
	require.True(t, slicesContainsPrefix(stdout.all(), "aws sqs send-message --endpoint-url "+exports["AWS_ENDPOINT_URL_SQS"]+" --queue-url "+exports["SAS_INTAKE_QUEUE_URL"]))

	// Orders, as sasctl submits them and as an application sends them.
	client := sqs.NewFromConfig(aws.Config{
		Region:      exports["AWS_REGION"],
		Credentials: credentials.NewStaticCredentialsProvider(exports["AWS_ACCESS_KEY_ID"], exports["AWS_SECRET_ACCESS_KEY"], ""),
	}, func(o *sqs.Options) { o.BaseEndpoint = aws.String(exports["AWS_ENDPOINT_URL_SQS"]) })
	queue := sqsqueue.New(client)
	var ctlOut bytes.Buffer
	ctl := &sasctl.App{Queue: queue, IntakeQueueURL: exports["SAS_INTAKE_QUEUE_URL"], Out: &ctlOut}
	require.NoError(t, ctl.Run(t.Context(), []string{"submit", "-order", "t-ok", "-workflow", "hello", "-payload", `{"name":"test"}`}))
	require.NoError(t, ctl.Run(t.Context(), []string{"submit", "-order", "t-fail", "-workflow", "hello", "-payload", `{"fail":true}`}))
	res, err := queue.Send(t.Context(), sas.SendParams{QueueURL: exports["SAS_INTAKE_QUEUE_URL"],
		Messages: []sas.OutboundMessage{{ID: "1", Body: `{"orderId":"t-nope","workflow":"nope"}`}}})
	require.NoError(t, err)
	require.Empty(t, res.Failed)

	stdout.waitFor(t, regexp.MustCompile(`  t-ok  hello  Processed  2 steps in `), 3*time.Minute, exited)
	stdout.waitFor(t, regexp.MustCompile(`  t-fail  hello  Compensated  in .*: charge Compensated, greet Error \(asked to fail\)$`), 3*time.Minute, exited)
	stdout.waitFor(t, regexp.MustCompile(`  t-nope  rejected: .*"nope" is not a registered workflow`), 3*time.Minute, exited)

	// The console is up on loopback and shows the orders (docs/console.md).
	// Its URL carries its per-launch secret; without it, nothing.
	consoleRE := regexp.MustCompile(`^# console: (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+)$`)
	m := consoleRE.FindStringSubmatch(stdout.waitFor(t, consoleRE, 3*time.Minute, exited))
	resp, err := http.Get(m[1] + "orders?workflow=hello")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no secret")
	req, _ := http.NewRequest(http.MethodGet, m[1]+"orders?workflow=hello", nil)
	req.Header.Set("Authorization", "Bearer "+m[2])
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `data-order="t-ok"`)
	require.Contains(t, string(page), `data-order="t-fail"`)

	// From outside, on the scheduler queue every agent may send to (issue
	// 21, docs/trust.md): an order creates nothing, a compensate undoes
	// nothing. Both are dropped with a logged reason.
	res, err = queue.Send(t.Context(), sas.SendParams{QueueURL: exports["SAS_SCHEDULER_QUEUE_URL"], Messages: []sas.OutboundMessage{
		{ID: "1", Body: `{"v":1,"orderId":"t-smuggled","workflow":"hello","payload":{"name":"x"}}`},
		{ID: "2", Body: `{"v":1,"kind":"compensate","orderId":"t-ok","actor":"operator:alice"}`},
	}})
	require.NoError(t, err)
	require.Empty(t, res.Failed)
	schedLog := filepath.Join(dir, "dev", "scheduler.log")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(schedLog)
		return strings.Contains(string(b), "intake message from the scheduler queue") &&
			strings.Contains(string(b), "compensate message from the scheduler queue")
	}, time.Minute, 100*time.Millisecond, "both dropped with their reason")
	for _, l := range stdout.all() {
		require.NotContains(t, l, "t-smuggled", "no order from the scheduler queue")
		require.NotRegexp(t, `t-ok .*Compensat`, l, "nothing undone")
	}

	// The schedule's run, sent a minute after the start as EventBridge
	// Scheduler would, under its derived order id (docs/schedules.md).
	run := stderr.waitFor(t, regexp.MustCompile(`^sasdev: schedule: sent run every-minute-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`), 4*time.Minute, exited)
	id := run[strings.LastIndex(run, " ")+1:]
	stdout.waitFor(t, regexp.MustCompile(`  `+regexp.QuoteMeta(id)+`  hello  Processed  2 steps in `), 3*time.Minute, exited)

	// Every process it started: the emulators and the agent program.
	var pids []int
	for _, l := range stderr.all() {
		for _, m := range pidRE.FindAllStringSubmatch(l, -1) {
			pid, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			pids = append(pids, pid)
		}
	}
	require.Len(t, pids, 3, "DynamoDB Local, ElasticMQ and the echo agent:\n%s", stderr)

	begin := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	stopped = true
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status 0 after SIGINT")
	case <-time.After(45 * time.Second):
		t.Fatal("the dev server did not exit within 45 s of SIGINT")
	}
	t.Logf("stopped in %s", time.Since(begin).Round(time.Millisecond))
	stderr.waitFor(t, regexp.MustCompile(`^sasdev: stopped the agents, the scheduler, the supervisor and the emulators$`), time.Second, nil)
	for _, pid := range pids {
		// The process and its process group (a JVM's children) are gone.
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "pid %d is still there", pid)
		require.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "process group %d is still there", pid)
	}
	agentLog, err := os.ReadFile(filepath.Join(dir, "dev", "agent-echo.log"))
	require.NoError(t, err)
	require.Contains(t, string(agentLog), "agent: stopped polling", "the agent program stopped on its own, not killed")
}

var pidRE = regexp.MustCompile(`\(pid (\d+)\)`)

// withoutEndpoints hides the emulators of `make test` (and the choice of
// SQS emulators it made for the queue contract suite) so that the server
// starts its own.
func withoutEndpoints(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_ENDPOINT_URL") || strings.HasPrefix(k, "SAS_RIG_SQS") || k == "SAS_EMULATOR_NAME" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func slicesContainsPrefix(ls []string, prefix string) bool {
	for _, l := range ls {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// lines collects a stream's lines for waitFor.
type lines struct {
	mu      sync.Mutex
	ls      []string
	changed chan struct{}
}

func (l *lines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l.mu.Lock()
		l.ls = append(l.ls, sc.Text())
		if l.changed != nil {
			close(l.changed)
			l.changed = nil
		}
		l.mu.Unlock()
	}
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ls...)
}

func (l *lines) String() string { return strings.Join(l.all(), "\n") }

// waitFor waits until a line matches re, failing the test after timeout or
// when the process exits first (exited, when not nil).
func (l *lines) waitFor(t *testing.T, re *regexp.Regexp, timeout time.Duration, exited chan error) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		for _, s := range l.ls {
			if re.MatchString(s) {
				l.mu.Unlock()
				return s
			}
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case err := <-exited:
			exited <- err
			t.Fatalf("the dev server exited (%v) before printing a line like %q", err, re)
		case <-deadline:
			t.Fatalf("no line like %q within %s", re, timeout)
		}
	}
}
