// Package poller plays outside Lambda what AWS runs around the handlers:
// pollers that behave like SQS event source mappings, and a ticker like the
// EventBridge schedule that drives the supervisor. `make dev` (cmd/sasdev)
// and the local runs (internal/dev/localrun) host the actors with them.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
)

// SQSHandler is a typed Lambda handler for SQS events.
type SQSHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Poller behaves like an SQS event source mapping with
// ReportBatchItemFailures: it receives up to BatchSize messages, invokes the
// handler with them as one event, deletes the ones the handler did not
// report as failed, and leaves the rest to reappear after the visibility
// timeout. A handler error (or panic) fails the whole batch, as in Lambda.
// Dead-lettering after maxReceiveCount is the queue's redrive policy's job.
type Poller struct {
	Name       string
	Queue      sas.Queue
	QueueURL   string
	QueueARN   string
	BatchSize  int           // default 10
	Wait       time.Duration // long-poll wait, default 1s
	Visibility time.Duration // 0: the queue's default
	Workers    int           // concurrent invocations ("maximum concurrency"), default 2
	Handler    SQSHandler
	Logger     *slog.Logger
	// Paused, when set, is asked before each receive: while it says yes the
	// poller receives nothing, as a disabled event source mapping
	// (an operator's pause of the queue's agent, docs/console.md).
	Paused func(context.Context) bool
	// Abandoned, when set, is told of a batch received for an instance
	// that died meanwhile (its context ended while the receive was out):
	// the batch is never handed to a handler, and SQS has counted its
	// receives, as for a Lambda invocation throttled or cut before it ran.
	Abandoned func([]sas.InboundMessage)

	mu    sync.Mutex
	stats PollerStats
}

// PollerStats counts what a poller did.
type PollerStats struct {
	Receives, Messages, Invocations, Deleted, Failed, HandlerErrors int
	// Paused counts polls that received nothing because Paused said so.
	Paused int
	// Abandoned counts messages received for an instance that died
	// before its handler got them (Poller.Abandoned).
	Abandoned int
}

// Stats returns a snapshot of the counters.
func (p *Poller) Stats() PollerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

func (p *Poller) defaults() error {
	if p.Queue == nil || p.QueueURL == "" || p.Handler == nil {
		return fmt.Errorf("poller %s: queue, queue URL and handler are required", p.Name)
	}
	if p.BatchSize <= 0 || p.BatchSize > 10 {
		p.BatchSize = 10
	}
	if p.Wait <= 0 {
		p.Wait = time.Second
	}
	if p.Workers <= 0 {
		p.Workers = 2
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	return nil
}

// Run polls until ctx is done.
func (p *Poller) Run(ctx context.Context) error {
	if err := p.defaults(); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for w := 0; w < p.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
					p.Logger.Warn("poll failed", "poller", p.Name, "err", err)
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// pausedPoll is how often a paused poller asks again.
const pausedPoll = 500 * time.Millisecond

// PausedBy is a Poller.Paused that reads the agents' pauses from the store:
// paused while any of agents is. A failed read counts as paused (a pause
// must hold; the next read decides again).
func PausedBy(ps sas.PauseReader, agents ...string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		all, err := ps.AgentPauses(ctx)
		return err != nil || all.Paused(agents...)
	}
}

// PollOnce receives one batch and invokes the handler with it. It returns
// how many messages it handled.
func (p *Poller) PollOnce(ctx context.Context) (int, error) {
	if err := p.defaults(); err != nil {
		return 0, err
	}
	if p.Paused != nil && p.Paused(ctx) {
		p.count(func(s *PollerStats) { s.Paused++ })
		select {
		case <-ctx.Done():
		case <-time.After(pausedPoll):
		}
		return 0, nil
	}
	// The receive is the event source's, not the instance's: it ends even
	// when the instance dies meanwhile, so that what it took is known.
	// (Cancelled with the instance, it took messages that nobody saw:
	// counted receives no handler had and no log named, issue 31.)
	msgs, err := p.Queue.Receive(context.WithoutCancel(ctx), sas.ReceiveParams{QueueURL: p.QueueURL, Max: p.BatchSize, Wait: p.Wait, Visibility: p.Visibility})
	p.count(func(s *PollerStats) { s.Receives++; s.Messages += len(msgs) })
	if err != nil {
		return 0, fmt.Errorf("receiving from %s: %w", p.Name, err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if ctx.Err() != nil {
		// The instance died while the receive was out: the batch is
		// never handled, and comes back after its visibility timeout.
		p.count(func(s *PollerStats) { s.Abandoned += len(msgs) })
		if p.Abandoned != nil {
			p.Abandoned(msgs)
		}
		return len(msgs), nil
	}
	ev := sqsevent.Event(p.QueueARN, msgs)
	resp, err := p.invoke(ctx, ev)
	p.count(func(s *PollerStats) { s.Invocations++ })
	if err != nil {
		// Lambda retries the whole batch: nothing is deleted.
		p.count(func(s *PollerStats) { s.HandlerErrors++; s.Failed += len(msgs) })
		p.Logger.Warn("handler failed the batch", "poller", p.Name, "messages", len(msgs), "err", err)
		return len(msgs), nil
	}
	receipts := sqsevent.Done(msgs, resp)
	p.count(func(s *PollerStats) { s.Failed += len(msgs) - len(receipts) })
	if len(receipts) > 0 {
		res, err := p.Queue.Delete(ctx, sas.DeleteParams{QueueURL: p.QueueURL, Receipts: receipts})
		if err != nil {
			return len(msgs), fmt.Errorf("deleting from %s: %w", p.Name, err)
		}
		p.count(func(s *PollerStats) { s.Deleted += len(receipts) - len(res.Failed) })
	}
	return len(msgs), nil
}

func (p *Poller) invoke(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	resp, err = p.Handler(ctx, ev)
	if err == nil && resp.BatchItemFailures == nil {
		// Lambda accepts null, but some pollers (MiniStack) redeliver
		// forever on it: hold handlers to an empty list.
		err = errors.New("handler returned a nil batchItemFailures list; return an empty one")
	}
	return resp, err
}

func (p *Poller) count(f func(*PollerStats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

// Ticker runs f every interval until ctx is done, like an EventBridge
// schedule. The first run happens after one interval.
func Ticker(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}
