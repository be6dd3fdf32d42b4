package sastest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
)

// handler is a typed Lambda handler of SQS events.
type handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// maxRounds bounds the delivery rounds at one instant of virtual time: more
// means messages that keep coming back visible at once, a loop the clock
// would never break.
const maxRounds = 10_000

// drive delivers messages and moves the clock until the order is settled,
// and returns its view and the statuses its replyTo queue got.
func (e *Env) drive(id string, deadline time.Time) (sas.OrderView, []sas.Status) {
	e.t.Helper()
	for {
		e.deliverAll()
		v, err := e.store.GetOrder(e.ctx, id)
		v = e.definitions.Attach(e.ctx, v) // which steps have an undo: the order's state reads right
		var wake time.Time
		if err == nil {
			var sent bool
			if wake, sent = e.answer(v); sent {
				continue // the outside world answered a waiting step
			}
		}
		quiet := e.quiet()
		switch {
		case err == nil && quiet && settled(v):
			return v, e.statuses(id)
		case errors.Is(err, sas.ErrNotFound) && quiet:
			for _, s := range e.statuses(id) {
				if s.Status == sas.StatusRejected {
					e.t.Fatalf("sastest: order %s was rejected: %s", id, s.Reason)
				}
			}
			e.t.Fatalf("sastest: order %s was never stored, and nothing is left to deliver (see the logs)", id)
		case err != nil && !errors.Is(err, sas.ErrNotFound):
			e.t.Fatalf("sastest: reading order %s: %v", id, err)
		}
		if !e.clock.Now().Before(deadline) {
			e.t.Fatalf("sastest: order %s did not settle within %s of virtual time (Options.Timeout): %s; queues: %s",
				id, e.opts.Timeout, describe(v), e.describeQueues())
		}
		if !e.skipIdleSweeps(quiet, nextDue(v), wake) {
			e.advance(quiet)
		}
	}
}

// skipIdleSweeps moves the next sweep on past the sweeps that would find
// nothing of the order due (the queues empty, its earliest deadline later),
// and the clock to an answer due before that sweep: a callback step that
// waits 72 hours takes a handful of sweeps, not 4,320. It reports whether
// it moved the clock to an answer (then no sweep is due yet).
func (e *Env) skipIdleSweeps(quiet bool, due, wake time.Time) bool {
	if !quiet {
		return false
	}
	if every := e.opts.SupervisorEvery; !due.IsZero() && due.After(e.nextSweep) {
		n := (due.Sub(e.nextSweep) + every - 1) / every
		e.nextSweep = e.nextSweep.Add(n * every)
	}
	if !wake.IsZero() && wake.Before(e.nextSweep) && wake.After(e.clock.Now()) {
		e.clock.Set(wake)
		return true
	}
	return false
}

// settled reports whether nothing will move the order on its own, given
// that the queues are empty: no step is held (the supervisor would act on
// its deadline) or ready to be claimed, and no give-up still owes its
// effects.
func settled(v sas.OrderView) bool {
	for _, r := range v.Steps {
		switch {
		case r.ProcessState.Leased(), len(r.Owes) > 0:
			return false
		case r.ProcessState == sas.Pending && !r.DueAt.IsZero():
			return false
		}
	}
	return len(v.Steps) > 0
}

// advance moves the clock: a second, while messages wait to become visible
// again; straight to the supervisor's next sweep when only the supervisor
// can move the order. The sweep runs when it is due.
func (e *Env) advance(quiet bool) {
	e.t.Helper()
	now := e.clock.Now()
	next := e.nextSweep
	if soon := now.Add(time.Second); !quiet && soon.Before(next) {
		next = soon
	}
	if next.After(now) {
		e.clock.Set(next) // never back: an agent's Sleep may have moved it past
	}
	if e.clock.Now().Before(e.nextSweep) {
		return
	}
	for !e.clock.Now().Before(e.nextSweep) {
		e.nextSweep = e.nextSweep.Add(e.opts.SupervisorEvery)
	}
	if _, err := e.sup.RunOnce(e.ctx); err != nil {
		e.t.Fatalf("sastest: the supervisor's sweep failed: %v", err)
	}
}

// deliverAll delivers the visible messages of every queue to its handler,
// until none is visible.
func (e *Env) deliverAll() {
	e.t.Helper()
	actors := append([]actor{e.sched}, e.agents...)
	for round := 0; ; round++ {
		if round == maxRounds {
			e.t.Fatalf("sastest: messages still visible after %d delivery rounds at one instant: a loop (queues: %s)", maxRounds, e.describeQueues())
		}
		n := 0
		for _, a := range actors {
			for _, url := range a.queues {
				n += e.deliver(a, url)
			}
		}
		if n == 0 {
			return
		}
	}
}

// deliver is one poll of an event source mapping with
// ReportBatchItemFailures: receive a batch, invoke the handler, delete what
// it did not report failed (all is left when it fails the batch).
func (e *Env) deliver(a actor, url string) int {
	e.t.Helper()
	msgs, err := e.queue.Receive(e.ctx, sas.ReceiveParams{QueueURL: url, Max: a.batch})
	if err != nil {
		e.t.Fatalf("sastest: receiving from %s: %v", url, err)
	}
	if len(msgs) == 0 {
		return 0
	}
	arn, err := e.queue.QueueARN(url)
	if err != nil {
		e.t.Fatalf("sastest: %v", err)
	}
	ev := sqsevent.Event(arn, msgs)
	resp, err := a.handle(e.ctx, ev)
	if err != nil {
		return len(msgs) // the whole batch comes back after its visibility timeout
	}
	if receipts := sqsevent.Done(msgs, resp); len(receipts) > 0 {
		if _, err := e.queue.Delete(e.ctx, sas.DeleteParams{QueueURL: url, Receipts: receipts}); err != nil {
			e.t.Fatalf("sastest: deleting from %s: %v", url, err)
		}
	}
	return len(msgs)
}

// workQueues are the queues the actors take.
func (e *Env) workQueues() []string {
	urls := slices.Clone(e.sched.queues)
	for _, a := range e.agents {
		urls = append(urls, a.queues...)
	}
	return urls
}

// quiet reports whether the work queues hold no message at all: none
// visible, in flight or delayed.
func (e *Env) quiet() bool {
	e.t.Helper()
	for _, url := range e.workQueues() {
		s, err := e.queue.Stats(url)
		if err != nil {
			e.t.Fatalf("sastest: %v", err)
		}
		if s.Visible+s.InFlight+s.Delayed > 0 {
			return false
		}
	}
	return true
}

func (e *Env) describeQueues() string {
	var parts []string
	for _, url := range e.workQueues() {
		s, err := e.queue.Stats(url)
		if err != nil {
			continue
		}
		if n := s.Visible + s.InFlight + s.Delayed; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%d visible, %d in flight, %d delayed)", sas.QueueName(url), n, s.Visible, s.InFlight, s.Delayed))
		}
	}
	if len(parts) == 0 {
		return "empty"
	}
	return strings.Join(parts, ", ")
}

// describe says where each step of an order is.
func describe(v sas.OrderView) string {
	if len(v.Steps) == 0 {
		return "the order was never stored"
	}
	var parts []string
	for _, r := range v.Steps {
		s := fmt.Sprintf("%s %s (attempt %d, %d failures", r.StepName, r.ProcessState, r.Attempt, r.FailureCount)
		if r.LastError != "" {
			s += ", last error: " + r.LastError
		}
		parts = append(parts, s+")")
	}
	return "steps " + strings.Join(parts, "; ")
}

// statuses drains the status queue and returns the statuses of order id,
// in sequence order, each once.
func (e *Env) statuses(id string) []sas.Status {
	e.t.Helper()
	var out []sas.Status
	for {
		msgs, err := e.queue.Receive(e.ctx, sas.ReceiveParams{QueueURL: e.statusURL, Max: 10})
		if err != nil {
			e.t.Fatalf("sastest: receiving statuses: %v", err)
		}
		if len(msgs) == 0 {
			break
		}
		var receipts []string
		for _, m := range msgs {
			receipts = append(receipts, m.Receipt)
			var s sas.Status
			if err := json.Unmarshal([]byte(m.Body), &s); err != nil {
				e.t.Fatalf("sastest: a status that does not decode: %v: %s", err, m.Body)
			}
			if s.OrderID == id && !slices.ContainsFunc(out, func(o sas.Status) bool { return o.Sequence == s.Sequence && o.Status == s.Status }) {
				out = append(out, s)
			}
		}
		if _, err := e.queue.Delete(e.ctx, sas.DeleteParams{QueueURL: e.statusURL, Receipts: receipts}); err != nil {
			e.t.Fatalf("sastest: deleting statuses: %v", err)
		}
	}
	slices.SortStableFunc(out, func(a, b sas.Status) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out
}
