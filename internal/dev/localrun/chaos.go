package localrun

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"encoding/json"
	"fmt"
	mathrand "math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/sas"
)

// Faults the harness itself injects (the simulator's are in its call log).

// InjectedLog keeps the harness's faults per order. Safe for concurrent use.
type InjectedLog struct {
	mu      sync.Mutex
	byOrder map[string][]judge.HarnessFault
	counts  map[string]int
}

func newInjectedLog() *InjectedLog {
	return &InjectedLog{byOrder: map[string][]judge.HarnessFault{}, counts: map[string]int{}}
}

// note records a fault against the order a message body is about.
func (l *InjectedLog) note(kind, body string, at time.Time) {
	var m struct {
		Kind    sas.Kind `json:"kind"`
		OrderID string   `json:"orderId"`
		Step    *int     `json:"step"`
		Attempt int      `json:"attempt"`
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.OrderID == "" {
		return // a malformed intake: no order to blame
	}
	f := judge.HarnessFault{OrderID: m.OrderID, Step: -1, Attempt: m.Attempt, Kind: kind, Message: m.Kind, At: at}
	switch {
	case m.Step != nil:
		f.Step = *m.Step
	case m.Kind == "" || m.Kind == sas.KindIntake:
		f.Step, f.Message = 0, sas.KindIntake // the intake claims step 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byOrder[m.OrderID] = append(l.byOrder[m.OrderID], f)
	l.counts[kind]++
}

// Of returns the faults injected into one order, oldest first.
func (l *InjectedLog) Of(orderID string) []judge.HarnessFault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]judge.HarnessFault(nil), l.byOrder[orderID]...)
}

// Counts returns how many faults of each kind were injected.
func (l *InjectedLog) Counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.counts))
	for k, v := range l.counts {
		out[k] = v
	}
	return out
}

// chance is a seeded coin shared by the wrappers.
type chance struct {
	mu  sync.Mutex
	rng *mathrand.Rand
}

func newChance(seed uint64) *chance {
	return &chance{rng: mathrand.New(mathrand.NewPCG(seed, 0x5eed))}
}

func (c *chance) hit(p float64) bool {
	if p <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < p
}

// dupQueue delivers some messages twice, as SQS's at-least-once delivery
// may: with probability Rate a sent message is sent again right after.
type dupQueue struct {
	sas.Queue
	rate float64
	coin *chance
	log  *InjectedLog
}

func (q *dupQueue) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	res, err := q.Queue.Send(ctx, p)
	if err != nil || q.rate <= 0 {
		return res, err
	}
	failed := map[string]bool{}
	for _, f := range res.Failed {
		failed[f.ID] = true
	}
	var again []sas.OutboundMessage
	for _, m := range p.Messages {
		if !failed[m.ID] && q.coin.hit(q.rate) {
			again = append(again, sas.OutboundMessage{ID: m.ID + "-dup", Body: m.Body, Delay: m.Delay})
		}
	}
	if len(again) == 0 {
		return res, nil
	}
	// The copy is best effort: a failed copy is a duplicate that did not happen.
	if _, err := q.Queue.Send(ctx, sas.SendParams{QueueURL: p.QueueURL, Messages: again}); err == nil {
		now := time.Now()
		for _, m := range again {
			q.log.note(judge.FaultDuplicate, m.Body, now)
		}
	}
	return res, nil
}

// killKey carries, in an invocation's context, the function that kills the
// instance running it.
type killKey struct{}

// killBeforeSendQueue kills the scheduler instance that is about to send an
// agent request, with probability Rate, instead of sending: its state write
// is done, its request never leaves, and its batch is abandoned undeleted —
// a scheduler dying between its write and its send (docs/pattern.md §2).
// Depth reads through to the real queue: the duplicating wrapper only
// touches sends.
func (q *dupQueue) Depth(ctx context.Context, url string) (sas.QueueDepth, error) {
	dr, ok := q.Queue.(sas.DepthReader)
	if !ok {
		return sas.QueueDepth{}, fmt.Errorf("reading the depth of %s: %T cannot", url, q.Queue)
	}
	return dr.Depth(ctx, url)
}

type killBeforeSendQueue struct {
	sas.Queue
	agentQueueURLs []string
	rate           float64
	coin           *chance
	log            *InjectedLog
}

func (q *killBeforeSendQueue) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	kill, ok := ctx.Value(killKey{}).(func())
	if !ok || !slices.Contains(q.agentQueueURLs, p.QueueURL) || !q.coin.hit(q.rate) {
		return q.Queue.Send(ctx, p)
	}
	now := time.Now()
	for _, m := range p.Messages {
		q.log.note(judge.FaultKilledBeforeSend, m.Body, now)
	}
	kill()
	return sas.SendResult{}, fmt.Errorf("instance killed before sending %d messages: %w", len(p.Messages), context.Canceled)
}

// skewedClock is a supervisor's clock, off by a fixed offset.
type skewedClock struct{ offset time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().UTC().Add(c.offset) }

// skewFor spreads n supervisors' offsets evenly over [-skew, +skew].
func skewFor(i, n int, skew time.Duration) time.Duration {
	if n <= 1 || skew == 0 {
		return 0
	}
	return skew - time.Duration(i)*2*skew/time.Duration(n-1)
}

// inflight tracks a poller's invocations, so that when its instance is
// killed the harness knows which messages it abandoned.
type inflight struct {
	mu     sync.Mutex
	next   int
	events map[int][]string // invocation → bodies
}

func (f *inflight) wrap(h poller.SQSHandler) poller.SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		bodies := make([]string, len(ev.Records))
		for i, r := range ev.Records {
			bodies[i] = r.Body
		}
		f.mu.Lock()
		if f.events == nil {
			f.events = map[int][]string{}
		}
		f.next++
		id := f.next
		f.events[id] = bodies
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			delete(f.events, id)
			f.mu.Unlock()
		}()
		return h(ctx, ev)
	}
}

// bodies returns what the poller's invocations hold right now.
func (f *inflight) bodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]int, 0, len(f.events))
	for id := range f.events {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	var out []string
	for _, id := range ids {
		out = append(out, f.events[id]...)
	}
	return out
}
