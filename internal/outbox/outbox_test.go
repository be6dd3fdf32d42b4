package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// fakeQueue records every Send and fails entries a rule picks.
type fakeQueue struct {
	sas.Queue
	mu    sync.Mutex
	sends []sas.SendParams
	// fail returns a failure for one body, or nil.
	fail func(url, body string) *sas.SendFailure
	// whole fails the whole call for a queue.
	whole map[string]error
}

func (q *fakeQueue) Send(_ context.Context, p sas.SendParams) (sas.SendResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sends = append(q.sends, p)
	if err := q.whole[p.QueueURL]; err != nil {
		return sas.SendResult{}, err
	}
	var res sas.SendResult
	for _, m := range p.Messages {
		if q.fail == nil {
			continue
		}
		if f := q.fail(p.QueueURL, m.Body); f != nil {
			f.ID = m.ID
			res.Failed = append(res.Failed, *f)
		}
	}
	return res, nil
}

// delivered lists "url:body" for every message that went out, in order.
func (q *fakeQueue) delivered() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, p := range q.sends {
		failed := map[string]bool{}
		if q.whole[p.QueueURL] != nil {
			continue
		}
		for _, m := range p.Messages {
			if q.fail != nil && q.fail(p.QueueURL, m.Body) != nil {
				failed[m.ID] = true
			}
		}
		for _, m := range p.Messages {
			if !failed[m.ID] {
				out = append(out, p.QueueURL+":"+m.Body)
			}
		}
	}
	return out
}

type alertLog struct {
	mu   sync.Mutex
	got  []string
	fail error
}

func (a *alertLog) Alert(_ context.Context, al sas.Alert) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.got = append(a.got, al.OrderID)
	return nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func msg(url, body string) outbox.Message {
	return outbox.Message{QueueURL: url, Body: body, What: body}
}

// Ten units' messages to one queue: one Send; two queues: one Send each.
func TestOneSendPerQueuePerWave(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	var b outbox.Batch
	for i := range 10 {
		b.Unit(i).Send(msg("agent", "req"+strconv.Itoa(i)))
	}
	require.Empty(t, b.Flush(context.Background(), outbox.Sink{Queue: q, Logger: quiet}))
	require.Len(t, q.sends, 1)
	require.Len(t, q.sends[0].Messages, 10)

	q = &fakeQueue{}
	for i := range 10 {
		u := b.Unit(i)
		u.Send(msg("agent", "req"+strconv.Itoa(i)))
		u.Send(msg("caller", "status"+strconv.Itoa(i)))
	}
	require.Empty(t, b.Flush(context.Background(), outbox.Sink{Queue: q, Logger: quiet}))
	require.Len(t, q.sends, 2, "wave 0: the requests; wave 1: the statuses")
	require.Equal(t, "agent", q.sends[0].QueueURL)
	require.Equal(t, "caller", q.sends[1].QueueURL)
}

// A unit's effects leave in the order it added them, and a failure stops
// that unit's later ones; the other units are not held up.
func TestFailureStopsOnlyItsUnit(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{fail: func(url, body string) *sas.SendFailure {
		if body == "req1" {
			return &sas.SendFailure{Code: "ThrottlingException", Message: "slow down"}
		}
		return nil
	}}
	alerts := &alertLog{}
	var b outbox.Batch
	for i := range 3 {
		u := b.Unit(i)
		u.Send(msg("agent", "req"+strconv.Itoa(i)))
		u.Alert(sas.Alert{OrderID: "o" + strconv.Itoa(i)})
		u.Send(msg("caller", "status"+strconv.Itoa(i)))
	}
	failed := b.Flush(context.Background(), outbox.Sink{Queue: q, Alerter: alerts, Logger: quiet})
	require.Len(t, failed, 1)
	require.Equal(t, 1, failed[0].Unit)
	require.ErrorContains(t, failed[0].Err, "ThrottlingException")
	require.Equal(t, []string{"agent:req0", "agent:req2", "caller:status0", "caller:status2"}, q.delivered())
	require.Equal(t, []string{"o0", "o2"}, alerts.got, "unit 1's alert waits on its failed message")
}

// A failed alert stops its unit's later messages, and is reported.
func TestFailedAlertFailsItsUnit(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	var b outbox.Batch
	u := b.Unit(0)
	u.Alert(sas.Alert{OrderID: "o-1", Step: 2})
	u.Send(msg("scheduler", "compensate"))
	failed := b.Flush(context.Background(), outbox.Sink{Queue: q, Alerter: &alertLog{fail: errors.New("SNS down")}, Logger: quiet})
	require.Len(t, failed, 1)
	require.ErrorContains(t, failed[0].Err, "alerting on step o-1/2: SNS down")
	require.Empty(t, q.delivered())
}

// A unit marked failed (an effect it could not build) is reported with
// its error: what it added before goes out, what it added after does not,
// and the other units are not held up.
func TestFailMarksItsUnitFailedWhereItStands(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	var b outbox.Batch
	u := b.Unit(0)
	u.Send(msg("caller", "status0"))
	u.Fail(errors.New("results unread"))
	u.Send(msg("agent", "req0"))
	b.Unit(1).Send(msg("agent", "req1"))
	failed := b.Flush(context.Background(), outbox.Sink{Queue: q, Logger: quiet})
	require.Len(t, failed, 1)
	require.Equal(t, 0, failed[0].Unit)
	require.ErrorContains(t, failed[0].Err, "results unread")
	require.Equal(t, []string{"caller:status0", "agent:req1"}, q.delivered())
}

// Messages to one queue keep the order they were added in, across units:
// a unit's second message never overtakes another unit's first to the same
// queue.
func TestQueueOrderAcrossUnits(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	var b outbox.Batch
	b.Unit(0).Send(msg("caller", "a"))
	u1 := b.Unit(1)
	u1.Send(msg("agent", "b"))
	u1.Send(msg("caller", "c"))
	b.Unit(2).Send(msg("caller", "d"))
	require.Empty(t, b.Flush(context.Background(), outbox.Sink{Queue: q, Logger: quiet}))
	var caller []string
	for _, d := range q.delivered() {
		if body, ok := strings.CutPrefix(d, "caller:"); ok {
			caller = append(caller, body)
		}
	}
	require.Equal(t, []string{"a", "c", "d"}, caller)
}

// A best-effort message its queue refuses for good is skipped; the same
// message failing for a passing reason fails its unit.
func TestBestEffortRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		fail   *sas.SendFailure
		whole  error
		failed bool
	}{
		{name: "sender fault", fail: &sas.SendFailure{Code: "InvalidMessageContents", SenderFault: true}},
		{name: "queue gone", whole: fmt.Errorf("no queue: %w", sas.ErrNotFound)},
		{name: "throttled", fail: &sas.SendFailure{Code: "ThrottlingException"}, failed: true},
		{name: "network", whole: errors.New("connection reset"), failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := &fakeQueue{whole: map[string]error{}}
			if tc.whole != nil {
				q.whole["caller"] = tc.whole
			}
			if tc.fail != nil {
				q.fail = func(url, _ string) *sas.SendFailure {
					if url == "caller" {
						f := *tc.fail
						return &f
					}
					return nil
				}
			}
			var b outbox.Batch
			u := b.Unit(0)
			m := msg("caller", "status")
			m.BestEffort = true
			u.Send(m)
			u.Send(msg("agent", "after"))
			failed := b.Flush(context.Background(), outbox.Sink{Queue: q, Logger: quiet})
			if tc.failed {
				require.Len(t, failed, 1)
				require.Empty(t, q.delivered())
				return
			}
			require.Empty(t, failed)
			require.Equal(t, []string{"agent:after"}, q.delivered())
		})
	}
}

// A sender fault wraps sas.ErrInvalid: redelivering cannot help.
func TestEntryErrorClassifies(t *testing.T) {
	t.Parallel()
	err := outbox.EntryError("agent.request", "q", sas.SendFailure{Code: "InvalidMessageContents", Message: "too big", SenderFault: true})
	require.ErrorIs(t, err, sas.ErrInvalid)
	require.True(t, outbox.Permanent(err))
	err = outbox.EntryError("agent.request", "q", sas.SendFailure{Code: "ServiceUnavailable"})
	require.NotErrorIs(t, err, sas.ErrInvalid)
	require.False(t, outbox.Permanent(err))
}
