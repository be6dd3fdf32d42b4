package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agentqueue"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// envStartHelper makes the test binary an agent program (startHelper), for
// the tests of Start outside Lambda.
const envStartHelper = "SAS_AGENT_TEST_START_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(envStartHelper) == "1" {
		startHelper()
	}
	os.Exit(m.Run())
}

// startHelper is an agent's main, as a user writes it.
func startHelper() {
	flights := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		return map[string]string{"servedBy": "start", "order": req.OrderID}, nil
	}, nil)
	log.Fatal(agent.Start(flights))
}

// Poll on real SQS does what Lambda's event source does for the handler:
// batches from the agent's queue, replies for what has an outcome, the
// deletion of those, and a request left without an outcome received again
// (its visibility shortened by the handler) and served on its second
// delivery. A malformed message is acknowledged. Poll returns when told to
// stop.
func TestPollOnSQS(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	w := &sqsWorld{t: t, client: sqs.NewFromConfig(cfg)}
	w.q = sqsqueue.New(w.client)
	sched, _ := w.queue("sched")
	queueURL, _ := w.queue("flights")

	var flakyRuns atomic.Int32
	a := agent.New("flights", agent.Tries(1)).
		Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
			switch req.OrderID {
			case "o-full":
				return nil, agent.Permanent(errors.New("flight FL123 is full"))
			case "o-flaky":
				if flakyRuns.Add(1) == 1 {
					return nil, errors.New("HTTP 503")
				}
			}
			return map[string]string{"reservation": "R-" + req.OrderID}, nil
		}, nil)
	h, err := agent.NewHandler(agent.HandlerConfig{
		Agents: []*agent.Agent{a}, SchedulerQueueURL: sched, QueueURL: queueURL,
		SQS: w.client, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	polled := make(chan error, 1)
	go func() { polled <- h.Poll(ctx) }()

	soon := func(r *sas.AgentRequest) { r.CompleteBy = time.Now().Add(time.Minute) }
	w.send(queueURL,
		sas.Encode(request("o-ok", soon)),
		sas.Encode(request("o-full", soon)),
		sas.Encode(request("o-flaky", soon)),
		`{"v":1,"kind":"agent.request","orderId":`)

	replies := w.receive(sched, "", 3)
	w.ack(sched, replies, events.SQSEventResponse{})
	byOrder := map[string]sas.AgentReply{}
	for _, r := range replies.Records {
		var rep sas.AgentReply
		require.NoError(t, json.Unmarshal([]byte(r.Body), &rep))
		byOrder[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeDone, byOrder["o-ok"].Outcome)
	require.JSONEq(t, `{"reservation":"R-o-ok"}`, string(byOrder["o-ok"].Result))
	require.Equal(t, sas.OutcomeFailed, byOrder["o-full"].Outcome)
	require.Equal(t, sas.OutcomeDone, byOrder["o-flaky"].Outcome, "served on its second delivery")
	require.EqualValues(t, 2, flakyRuns.Load())
	for id, rep := range byOrder {
		// From the queue's SentTimestamp to the run's start, and the run.
		require.False(t, rep.QueuedMs.IsZero(), "%s: the reply says how long the request waited", id)
		require.False(t, rep.RanMs.IsZero(), "%s: and how long it ran", id)
	}

	// Everything handled was deleted: nothing is visible or in flight.
	require.Eventually(t, func() bool {
		d, err := w.q.Depth(t.Context(), queueURL)
		return err == nil && d.Total() == 0
	}, 10*time.Second, 100*time.Millisecond, "the agent's queue is empty")

	// Poll returns (TestPollCancelsItsReceivesWhenTold checks that it cuts
	// its receives rather than waiting them out).
	cancel()
	require.NoError(t, <-polled)
}

func TestPollNeedsTheQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h := f.handler(agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) { return nil, nil }, nil))
	err := h.Poll(t.Context())
	require.ErrorContains(t, err, agent.EnvQueueURL)
	var ve *sas.ValidationError
	require.ErrorAs(t, err, &ve)
}

// Start, outside Lambda, is an agent program that polls its queue until
// SIGTERM and then exits with status 0; without its queue it says what is
// missing and exits 1 (log.Fatal).
func TestStartOutsideLambda(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	w := &sqsWorld{t: t, client: sqs.NewFromConfig(cfg)}
	w.q = sqsqueue.New(w.client)
	sched, _ := w.queue("sched")
	queueURL, _ := w.queue("flights")

	env := append(withoutLambda(os.Environ()), envStartHelper+"=1", agent.EnvSchedulerQueueURL+"="+sched)

	t.Run("no queue", func(t *testing.T) {
		out, err := helperCommand(t, env).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "output: %s", out)
		require.Equal(t, 1, ee.ExitCode())
		require.Contains(t, string(out), "not in Lambda (AWS_LAMBDA_RUNTIME_API is unset)")
		require.Contains(t, string(out), agent.EnvQueueURL)
	})

	var logs bytes.Buffer
	cmd := helperCommand(t, append(env, agent.EnvQueueURL+"="+queueURL))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	w.send(queueURL, sas.Encode(request("o-start", func(r *sas.AgentRequest) { r.CompleteBy = time.Now().Add(time.Minute) })))
	replies := w.receive(sched, "", 1)
	var rep sas.AgentReply
	require.NoError(t, json.Unmarshal([]byte(replies.Records[0].Body), &rep))
	require.Equal(t, sas.OutcomeDone, rep.Outcome)
	require.JSONEq(t, `{"servedBy":"start","order":"o-start"}`, string(rep.Result))

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		require.NoError(t, err, "exit status 0 after SIGTERM; output:\n%s", logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the agent did not exit after SIGTERM; output:\n%s", logs.String())
	}
	require.Contains(t, logs.String(), "stopped polling")
}

// helperCommand runs this test binary as the agent program of startHelper.
func helperCommand(t *testing.T, env []string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = env
	return cmd
}

// withoutLambda drops the variables that would make the helper a Lambda
// function's.
func withoutLambda(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") && !strings.HasPrefix(kv, "_LAMBDA_SERVER_PORT=") {
			out = append(out, kv)
		}
	}
	return out
}

// receiveBlocks is a queue whose receives wait for their context alone, as a
// long poll with no end would: Poll can stop only by cancelling them.
type receiveBlocks struct {
	*memqueue.Queue
	receiving chan struct{}
}

func (q receiveBlocks) Receive(ctx context.Context, _ sas.ReceiveParams) ([]sas.InboundMessage, error) {
	q.receiving <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Poll stops its receives when told to stop, rather than waiting them out:
// in a synctest bubble a receive it did not cancel would block for good (the
// bubble reports the deadlock), and one cancelled late shows in the
// bubble's time.
func TestPollCancelsItsReceivesWhenTold(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		q := receiveBlocks{Queue: f.queue, receiving: make(chan struct{})}
		cfg := f.config(agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) { return nil, nil }, nil))
		agentqueue.Use(&cfg, q)
		cfg.QueueURL, cfg.PriorityQueueURL = "https://sqs.local/flights", "https://sqs.local/flights-priority"
		h, err := agent.NewHandler(cfg)
		require.NoError(t, err)

		ctx, cancel := context.WithCancel(t.Context())
		polled := make(chan error, 1)
		go func() { polled <- h.Poll(ctx) }()
		for range 4 { // two pollers on each queue
			<-q.receiving
		}
		stopped := time.Now() // the bubble's clock: it moves only when every goroutine waits on time
		cancel()
		require.NoError(t, <-polled)
		require.Zero(t, time.Since(stopped), "nothing was waited out (not the receives, not the grace for batches in hand)")
	})
}
