package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/dev/poller"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
)

// How the tracker watches orders.
const (
	// watchEvery is how often the orders in flight are read.
	watchEvery = 250 * time.Millisecond
	// forgetMissing drops an order that is still not in the store this long
	// after the scheduler handled a message about it (it was refused).
	forgetMissing = 30 * time.Second
)

// tracker prints a line per order as it settles. It learns which orders
// to watch from the scheduler's own batches: after the scheduler handled
// an intake message or a message about an order (an agent's reply, a
// retry, a compensation), the order is read from the store every
// watchEvery until nothing will move it any more (sas.OrderView.Settled), and
// then its line is printed. So every order shows, however it was submitted
// and whatever its replyTo, without reading the status queue the user may
// want to read. An intake the scheduler refused gets a line with the
// reason, found the way the scheduler finds it (sas.ParseIntake).
type tracker struct {
	con   *console
	store sas.StateStore
	defs  *sas.Definitions // each view's definition, so Settled knows which steps owe an undo
	rules sas.IntakeRules

	mu       sync.Mutex
	active   map[string]time.Time // order → when it was last handled
	reported map[string]string    // order → what its last line said
}

func newTracker(con *console, store sas.StateStore, rules sas.IntakeRules) *tracker {
	return &tracker{con: con, store: store, defs: sas.NewDefinitions(nil, store), rules: rules, active: map[string]time.Time{}, reported: map[string]string{}}
}

// observe wraps the scheduler's handler: it runs the handler unchanged and
// then notes the orders of the messages it handled (not those it left for
// redelivery).
func (t *tracker) observe(h poller.SQSHandler, intake bool) poller.SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := h(ctx, ev)
		if err != nil {
			return resp, err
		}
		failed := sqsevent.Failed(resp)
		for _, r := range ev.Records {
			if failed[r.MessageId] {
				continue
			}
			if intake {
				in, perr := sas.ParseIntake([]byte(r.Body), t.rules)
				if perr != nil {
					t.rejected(in.OrderID, perr)
					continue
				}
				t.watch(in.OrderID)
				continue
			}
			var hdr sas.Header
			if json.Unmarshal([]byte(r.Body), &hdr) == nil && hdr.OrderID != "" {
				t.watch(hdr.OrderID)
			}
		}
		return resp, nil
	}
}

func (t *tracker) watch(orderID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active[orderID] = time.Now()
}

func (t *tracker) rejected(orderID string, why error) {
	if orderID == "" {
		orderID = "(no order id)"
	}
	t.con.println(fmt.Sprintf("%s  %s  rejected: %v", time.Now().Format("15:04:05"), orderID, why))
}

// run reads the watched orders every watchEvery until ctx is done.
func (t *tracker) run(ctx context.Context) {
	poller.Ticker(ctx, watchEvery, t.sweep)
}

// sweep reads each watched order once and reports those that settled.
func (t *tracker) sweep(ctx context.Context) {
	t.mu.Lock()
	ids := make(map[string]time.Time, len(t.active))
	for id, at := range t.active {
		ids[id] = at
	}
	t.mu.Unlock()
	for id, at := range ids {
		v, err := t.store.GetOrder(ctx, id)
		switch {
		case errors.Is(err, sas.ErrNotFound):
			if time.Since(at) > forgetMissing {
				t.forget(id, at)
			}
			continue
		case err != nil:
			continue // the next sweep reads it again
		}
		if v = t.defs.Attach(ctx, v); !v.Settled() {
			continue
		}
		t.forget(id, at)
		line := finishLine(v)
		t.mu.Lock()
		seen := t.reported[id] == line
		t.reported[id] = line
		t.mu.Unlock()
		if !seen { // a redelivered message about a settled order says nothing new
			t.con.println(line)
		}
	}
}

// forget stops watching id unless a message about it came after at.
func (t *tracker) forget(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[id].Equal(at) {
		delete(t.active, id)
	}
}

// finishLine is an order's line: when it settled, its id and workflow, its
// state, its steps and how long it took from its submission.
//
//	10:04:05  order-1  payment  Processed  1 step in 412ms
//	10:04:09  order-2  trip  Compensated  in 1.2s: flight Compensated, hotel Error (no rooms)
func finishLine(v sas.OrderView) string {
	end := v.Order.CreatedAt
	for _, h := range v.History {
		if h.At.After(end) {
			end = h.At
		}
	}
	took := end.Sub(v.Order.CreatedAt).Round(time.Millisecond)
	state := v.State()
	head := fmt.Sprintf("%s  %s  %s  %s", end.Local().Format("15:04:05"), v.Order.OrderID, v.Order.Workflow, state)
	if state == sas.Processed {
		unit := "steps"
		if len(v.Steps) == 1 {
			unit = "step"
		}
		return fmt.Sprintf("%s  %d %s in %s", head, len(v.Steps), unit, took)
	}
	parts := make([]string, 0, len(v.Steps))
	for _, r := range v.Steps {
		if r.ProcessState == sas.Pending {
			continue // never started: the order stopped before it
		}
		p := r.StepName + " " + string(r.ProcessState)
		if r.LastError != "" && (r.ProcessState == sas.Error || r.ProcessState == sas.CompensationFailed) {
			p += " (" + r.LastError + ")"
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("%s  in %s: %s", head, took, strings.Join(parts, ", "))
}
