package agent

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
)

// Outside Lambda, an agent receives its requests itself (Poll). These
// mirror the SQS event source of a deployed agent function.
const (
	// pollBatch is the most messages one receive takes and one Handle call
	// gets: the event source's batch size.
	pollBatch = 10
	// pollWait is the long poll of each receive, SQS's longest: an idle
	// agent makes three requests a minute per poller.
	pollWait = 20 * time.Second
	// pollersPerQueue is how many batches of one queue are handled at once
	// (the event source's concurrency). Two, so that one slow request does
	// not hold up the others.
	pollersPerQueue = 2
	// pollGrace is how long the batches in hand when Poll is told to stop
	// may take to finish; then their context is cancelled, and what has no
	// outcome by then is left for redelivery.
	pollGrace = 10 * time.Second
	// deleteTimeout bounds the delete of a handled batch, which runs even
	// while Poll stops so that done work is not delivered again.
	deleteTimeout = 10 * time.Second
)

const envLambdaRuntimeAPI = "AWS_LAMBDA_RUNTIME_API"

// inLambda reports whether the process is a Lambda function's: the runtime
// sets AWS_LAMBDA_RUNTIME_API (and the retired go1.x runtime
// _LAMBDA_SERVER_PORT), as lambda.Start expects.
func inLambda(getenv func(string) string) bool {
	return getenv(envLambdaRuntimeAPI) != "" || getenv("_LAMBDA_SERVER_PORT") != ""
}

// Poll takes the agent's requests from its queues itself, the way Lambda's
// SQS event source feeds a deployed agent function, until ctx is done: it
// long-polls the agent's queue (HandlerConfig.QueueURL, required here) and
// its priority lane (PriorityQueueURL, when set) for batches of up to ten
// messages, hands each batch to Handle, deletes the messages Handle did not
// list as failures and leaves those to come back, as the event source
// does with ReportBatchItemFailures. A Handle error leaves the whole batch.
// Each queue has two batches in hand at most.
//
// When ctx is done, Poll stops receiving, gives the batches in hand ten
// seconds to finish (then cancels them: what has no outcome is left for
// redelivery) and returns nil. Failed receives are logged and retried with
// a backoff; Poll returns an error only when it cannot start.
//
// Start calls it outside Lambda; call it yourself to host an agent in a
// process of your own (a container, a test).
func (h *Handler) Poll(ctx context.Context) error {
	if h.queueURL == "" {
		return fmt.Errorf("polling for requests: %w", &sas.ValidationError{Field: "QueueURL",
			Reason: "required to poll: the agent's own queue (" + EnvQueueURL + ")"})
	}
	urls := []string{h.queueURL}
	if h.priorityURL != "" {
		urls = append(urls, h.priorityURL)
	}
	// The batches in hand outlive ctx by pollGrace.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	stopGrace := context.AfterFunc(ctx, func() { time.AfterFunc(pollGrace, cancelWork) })
	defer stopGrace()

	h.log.Info("agent: polling for requests (not in Lambda)", "queues", strings.Join(urls, " "))
	var wg sync.WaitGroup
	for _, url := range urls {
		for range pollersPerQueue {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.pollLoop(ctx, work, url)
			}()
		}
	}
	wg.Wait()
	h.log.Info("agent: stopped polling")
	return nil
}

// pollLoop receives batches from url under ctx and handles each under work
// until ctx is done.
func (h *Handler) pollLoop(ctx, work context.Context, url string) {
	arn := localARN(url)
	var backoff time.Duration
	for ctx.Err() == nil {
		msgs, err := h.queue.Receive(ctx, sas.ReceiveParams{QueueURL: url, Max: pollBatch, Wait: pollWait})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 500*time.Millisecond), 10*time.Second)
			h.log.Warn("agent: receiving requests failed; trying again", "queue", url, "in", backoff.String(), "err", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if len(msgs) > 0 {
			h.handleBatch(work, url, arn, msgs)
		}
	}
}

// handleBatch hands msgs to Handle as one event and deletes what it did not
// list as failed.
func (h *Handler) handleBatch(ctx context.Context, url, arn string, msgs []sas.InboundMessage) {
	resp, err := h.Handle(ctx, sqsevent.Event(arn, msgs))
	if err != nil {
		h.log.Warn("agent: the batch failed as a whole; it will be redelivered", "queue", url, "messages", len(msgs), "err", err.Error())
		return
	}
	receipts := sqsevent.Done(msgs, resp)
	if len(receipts) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	res, err := h.queue.Delete(dctx, sas.DeleteParams{QueueURL: url, Receipts: receipts})
	switch {
	case err != nil:
		h.log.Warn("agent: deleting handled requests failed; they will be delivered again", "queue", url, "err", err.Error())
	case len(res.Failed) > 0:
		h.log.Warn("agent: some handled requests were not deleted; they will be delivered again", "queue", url,
			"failed", len(res.Failed), "first", res.Failed[0].Message)
	}
}

// localARN names a queue as an event's EventSourceARN does. The handler
// matches a message to the queue it came from by the queue's name, the last
// part of both its URL and its ARN; region and account are not read.
func localARN(url string) string { return sas.LocalQueueARN("local", url) }

// startLocal runs h outside Lambda: Poll until SIGINT or SIGTERM, then exit
// the process with status 0, since main's log.Fatal(agent.Start(…)) is
// there for configuration errors. A second signal kills the process at once.
func startLocal(h *Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the next signal takes the default action
	}()
	if err := h.Poll(ctx); err != nil {
		return fmt.Errorf("not in Lambda (%s is unset), so the agent polls its queue itself: %w", envLambdaRuntimeAPI, err)
	}
	os.Exit(0)
	return nil
}
