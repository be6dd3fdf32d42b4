// Package outbox is where every actor's effects leave: the messages and
// operator alerts a handler decided on, sent after its state writes, batched.
//
// Deciding and sending are kept apart (docs/decisions.md, "One outbox"): a
// handler of one SQS record (or one supervised step) is handed a *Unit and
// adds to it what it wants sent; after the last unit, Batch.Flush sends
// everything and says which units did not get all their effects out, so the
// caller can have those redelivered (scheduler, agent) or re-driven from the
// store (supervisor). Nothing is carried in a context value.
//
// What Flush guarantees:
//
//   - batching: the messages of one wave to one queue go in one Send, which
//     the queue adapter cuts into SendMessageBatch requests of up to ten (SQS
//     bills a batch of ten small messages as one request);
//   - per-unit order: a unit's effects leave in the order it added them, each
//     in a wave after the unit's previous one, and a failure stops that
//     unit's later effects, exactly as an immediate send failing would have;
//   - per-queue order: messages to one queue leave in the order they were
//     added, whichever units added them;
//   - per-entry failures: SQS fails entries of a batch one by one; each is
//     mapped back to the unit that added it;
//   - the caller's queue rule: a message marked BestEffort (a status to a
//     submitter's replyTo) that the destination refuses for good (the queue is
//     gone, or it refuses the message) is logged and skipped, because a
//     caller's broken queue must not hold an order up; any other failure of
//     it (throttling, the network) fails its unit like any send.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Message is one message to send.
type Message struct {
	QueueURL string
	Body     string
	Delay    time.Duration // SQS delay, at most 15 minutes
	// What is for the logs and errors: "agent.request for o-1/0", say.
	What string
	// BestEffort marks a message whose permanent refusal by its queue is
	// logged and skipped instead of failing its unit (see the package
	// comment).
	BestEffort bool
}

// Batch collects the effects of the units of one invocation. The zero value
// is ready to use; Unit handles may be used from several goroutines.
type Batch struct {
	mu        sync.Mutex
	entries   []entry
	unitWave  map[int]int    // unit → wave of its last effect
	queueWave map[string]int // queue URL → wave of its last message
}

type entry struct {
	unit, wave int
	msg        *Message
	alert      *sas.Alert
	fail       error
}

// Unit is the handle one unit of work (one record) adds its effects with.
type Unit struct {
	b  *Batch
	id int
}

// Unit returns the handle of unit id (the record's index in its batch).
func (b *Batch) Unit(id int) *Unit {
	return &Unit{b: b, id: id}
}

// Send adds a message to the unit's effects.
func (u *Unit) Send(m Message) { u.b.add(u.id, entry{msg: &m}) }

// Alert adds an operator alert to the unit's effects. Alerts are not
// batched (an alerter is one call per alert), but they keep their place in
// the unit's order: an alert added after a message goes out only once that
// message has.
func (u *Unit) Alert(a sas.Alert) { u.b.add(u.id, entry{alert: &a}) }

// Fail marks the unit failed at this point of its effects: those added
// before it go out, those after it are not attempted, and Flush reports the
// unit with err, as if a send had failed there. A handler uses it for an
// effect it could not even build (a request whose results could not be
// read), so that its record is redelivered and its redelivery sends it.
func (u *Unit) Fail(err error) { u.b.add(u.id, entry{fail: err}) }

// Len reports how many effects the unit has added so far.
func (u *Unit) Len() int {
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	n := 0
	for _, e := range u.b.entries {
		if e.unit == u.id {
			n++
		}
	}
	return n
}

func (b *Batch) add(unit int, e entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unitWave == nil {
		b.unitWave, b.queueWave = map[int]int{}, map[string]int{}
	}
	wave := 0
	if w, ok := b.unitWave[unit]; ok {
		wave = w + 1
	}
	if e.msg != nil {
		wave = max(wave, b.queueWave[e.msg.QueueURL])
		b.queueWave[e.msg.QueueURL] = wave
	}
	b.unitWave[unit] = wave
	e.unit, e.wave = unit, wave
	b.entries = append(b.entries, e)
}

// Sink is where Flush sends: the queue, and the alerter (nil when no unit
// alerts).
type Sink struct {
	Queue   sas.Queue
	Alerter sas.Alerter
	Logger  *slog.Logger // default slog.Default()
}

// Failed is a unit that did not get all its effects out: Err is the first
// failure, and the unit's later effects were not attempted.
type Failed struct {
	Unit int
	Err  error
}

// Flush sends every effect added so far, wave by wave, and returns the units
// whose effects did not all go out, in unit order. It empties the batch.
func (b *Batch) Flush(ctx context.Context, sink Sink) []Failed {
	b.mu.Lock()
	entries := b.entries
	b.entries, b.unitWave, b.queueWave = nil, nil, nil
	b.mu.Unlock()
	log := sink.Logger
	if log == nil {
		log = slog.Default()
	}

	stopped := map[int]error{}
	maxWave := -1
	for _, e := range entries {
		maxWave = max(maxWave, e.wave)
	}
	for wave := 0; wave <= maxWave; wave++ {
		var msgs []entry
		for _, e := range entries {
			if e.wave != wave || stopped[e.unit] != nil {
				continue
			}
			if e.fail != nil {
				stopped[e.unit] = e.fail
				continue
			}
			if e.alert != nil {
				if err := raise(ctx, sink.Alerter, *e.alert); err != nil {
					stopped[e.unit] = err
				}
				continue
			}
			msgs = append(msgs, e)
		}
		// One Send per queue in this wave, in the order the queues first
		// appear (deterministic, so request counts are too).
		var urls []string
		byURL := map[string][]entry{}
		for _, e := range msgs {
			if _, ok := byURL[e.msg.QueueURL]; !ok {
				urls = append(urls, e.msg.QueueURL)
			}
			byURL[e.msg.QueueURL] = append(byURL[e.msg.QueueURL], e)
		}
		for _, url := range urls {
			group := byURL[url]
			out := make([]Message, len(group))
			for i, e := range group {
				out[i] = *e.msg
			}
			for i, err := range Send(ctx, sink.Queue, url, out) {
				if err == nil {
					continue
				}
				e := group[i]
				if e.msg.BestEffort && Permanent(err) {
					log.WarnContext(ctx, "message not delivered: its queue is gone or refuses it; skipped",
						"what", e.msg.What, "queue", url, "err", err.Error())
					continue
				}
				stopped[e.unit] = err
			}
		}
	}
	var failed []Failed
	for unit, err := range stopped {
		failed = append(failed, Failed{Unit: unit, Err: err})
	}
	slices.SortFunc(failed, func(a, b Failed) int { return a.Unit - b.Unit })
	return failed
}

func raise(ctx context.Context, a sas.Alerter, al sas.Alert) error {
	if a == nil {
		return fmt.Errorf("alert on %s/%d: no alerter configured", al.OrderID, al.Step)
	}
	if err := a.Alert(ctx, al); err != nil {
		return fmt.Errorf("alerting on step %s/%d: %w", al.OrderID, al.Step, err)
	}
	return nil
}

// Send sends messages to one queue in one Send (the adapter batches) and
// returns one error per message: nil for those that went out. It is the one
// place a per-entry failure is mapped back to its message; the agent's
// lingering reply batches call it directly.
func Send(ctx context.Context, q sas.Queue, url string, msgs []Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	out := make([]sas.OutboundMessage, len(msgs))
	for i, m := range msgs {
		out[i] = sas.OutboundMessage{ID: strconv.Itoa(i), Body: m.Body, Delay: m.Delay}
	}
	res, err := q.Send(ctx, sas.SendParams{QueueURL: url, Messages: out})
	if err != nil {
		for i, m := range msgs {
			errs[i] = fmt.Errorf("sending %s to %s: %w", m.What, url, err)
		}
		return errs
	}
	for _, f := range res.Failed {
		i, convErr := strconv.Atoi(f.ID)
		if convErr != nil || i < 0 || i >= len(msgs) {
			continue
		}
		errs[i] = EntryError(msgs[i].What, url, f)
	}
	return errs
}

// EntryError is the error of one message SQS did not take. A sender fault
// (the same message can never be sent) wraps sas.ErrInvalid, so that callers
// do not have it redelivered for nothing.
func EntryError(what, url string, f sas.SendFailure) error {
	err := fmt.Errorf("sending %s to %s: %s: %s", what, url, f.Code, f.Message)
	if f.SenderFault {
		return fmt.Errorf("%w: %w", sas.ErrInvalid, err)
	}
	return err
}

// Permanent reports whether a send failure will not change on a retry: the
// queue does not exist, or refuses the message.
func Permanent(err error) bool {
	return errors.Is(err, sas.ErrNotFound) || errors.Is(err, sas.ErrInvalid)
}
