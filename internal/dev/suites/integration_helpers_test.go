package suites_test

// Helpers of the integration suite (integration_test.go): a System wrapped
// with a status collector, a log capture, waits bounded by contexts, and the
// assertions every scenario ends with (final state, legal history, the
// simulator's ledger, statuses). Names carry an "it" prefix: other test files
// of this package are written concurrently and must not collide.

import (
	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
	"github.com/sas-go/sas/internal/testkit/logtest"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

// itSystem is a localrun.System under test.
type itSystem struct {
	*localrun.System
	reg      sas.Registry
	logs     *itLogs
	statuses *itStatuses

	stopRun context.CancelFunc
	runDone chan struct{}
}

// itStart starts a system on the emulators with a status collector and a log
// capture; with live it also starts polling and the supervisors' schedule.
// Everything stops at the end of t.
func itStart(t *testing.T, opts localrun.Options, live bool) *itSystem {
	t.Helper()
	emulator.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := &itLogs{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	began := time.Now()
	sys, err := localrun.Start(ctx, opts)
	require.NoError(t, err)
	t.Logf("system %s started in %s", sys.Opts.Name, time.Since(began).Round(time.Millisecond))
	reg, err := registry.Default(sys.Opts.StepTimeout)
	require.NoError(t, err)
	it := &itSystem{System: sys, reg: reg, logs: logs, statuses: &itStatuses{byOrder: map[string][]sas.Status{}}}

	bg, stopBG := context.WithCancel(context.Background())
	collected := make(chan struct{})
	go func() { defer close(collected); it.statuses.collect(bg, sys) }()
	t.Cleanup(func() {
		it.stopLive()
		stopBG()
		<-collected
		sys.Close()
	})
	if live {
		it.runLive()
	}
	return it
}

// runLive starts the pollers and the supervisors' schedule (once).
func (it *itSystem) runLive() {
	if it.runDone != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	it.stopRun, it.runDone = cancel, make(chan struct{})
	go func() { defer close(it.runDone); it.Run(ctx) }()
}

func (it *itSystem) stopLive() {
	if it.runDone != nil {
		it.stopRun()
		<-it.runDone
	}
}

// watch logs, when t fails, what the system knows of the orders: their
// records and the log lines that name them.
func (it *itSystem) watch(t *testing.T, ids ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, id := range ids {
			v, err := it.Store.GetOrder(ctx, id)
			if err != nil {
				t.Logf("order %s: %v", id, err)
				continue
			}
			for _, r := range v.Steps {
				t.Logf("order %s step %d %s: %s attempt %d failures %d lockedBy %q due %s lastError %q",
					id, r.Step, r.StepName, r.ProcessState, r.Attempt, r.FailureCount, r.LockedBy, r.DueAt.Format(time.StampMilli), r.LastError)
				for _, h := range r.History {
					t.Logf("    %s %s -> %s attempt %d by %s: %s", h.At.Format(time.StampMilli), h.From, h.To, h.Attempt, h.Actor, h.Reason)
				}
			}
			for _, e := range it.effectsOf(id) {
				t.Logf("  effect %s %s key %s at %s", e.Method, e.Path, e.Key, e.At.Format(time.StampMilli))
			}
			for _, st := range it.statuses.of(id) {
				t.Logf("  status %s seq %d step %q reason %q", st.Status, st.Sequence, st.Step, st.Reason)
			}
			for _, l := range it.logs.matching(id) {
				t.Logf("  log %s", l)
			}
		}
	})
}

// itCtx is a context for one scenario, bounded so a stuck scenario fails
// with what it was waiting for instead of hanging the suite.
func itCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitOrder polls the store until pred holds for the order, and returns it.
func (it *itSystem) waitOrder(ctx context.Context, t *testing.T, id, what string, pred func(sas.OrderView) bool) sas.OrderView {
	t.Helper()
	var last sas.OrderView
	var lastErr error
	for {
		v, err := it.Store.GetOrder(ctx, id)
		if err == nil {
			last, lastErr = v, nil
			if pred(v) {
				return v
			}
		} else if !errors.Is(err, sas.ErrNotFound) {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("order %s: gave up waiting for %s: %v (last error %v, last steps %s)", id, what, ctx.Err(), lastErr, itSteps(last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// itSteps renders an order's steps in a line.
func itSteps(v sas.OrderView) string {
	var b strings.Builder
	for _, r := range v.Steps {
		fmt.Fprintf(&b, "[%d %s %s a%d f%d]", r.Step, r.StepName, r.ProcessState, r.Attempt, r.FailureCount)
	}
	return b.String()
}

// itStates is a predicate: the steps are in exactly these states.
func itStates(want ...sas.ProcessState) func(sas.OrderView) bool {
	return func(v sas.OrderView) bool {
		if len(v.Steps) != len(want) {
			return false
		}
		for i, r := range v.Steps {
			if r.ProcessState != want[i] {
				return false
			}
		}
		return true
	}
}

// requireFinal waits until the order's steps are in the given states, lets
// the system run a little longer (so a late duplicate would show), and checks
// the order again: the same states, a legal history, and the ledger.
func (it *itSystem) requireFinal(ctx context.Context, t *testing.T, id string, want ...sas.ProcessState) sas.OrderView {
	t.Helper()
	it.waitOrder(ctx, t, id, fmt.Sprintf("steps %v", want), itStates(want...))
	v, err := it.Store.GetOrder(ctx, id)
	require.NoError(t, err)
	require.True(t, itStates(want...)(v), "order %s moved on after settling: %s", id, itSteps(v))
	require.True(t, v.Settled(), "order %s is final but the harness does not see it settled: %s", id, itSteps(v))
	storetest.RequireLegalHistory(t, v)
	it.requireLedger(t, v)
	return v
}

// itPathOf is the path of a step action such as "POST /payments".
func itPathOf(action string) string {
	if _, p, ok := strings.Cut(action, " "); ok {
		return p
	}
	return action
}

// itEverIn reports whether a step's history ever entered state s.
func itEverIn(r sas.StepRecord, s sas.ProcessState) bool {
	return slices.ContainsFunc(r.History, func(h sas.HistoryEntry) bool { return h.To == s })
}

// itHistoryBy counts a step's transitions made by actors with the prefix and
// ending in to ("" for any state).
func itHistoryBy(r sas.StepRecord, actorPrefix string, to sas.ProcessState) int {
	n := 0
	for _, h := range r.History {
		if strings.HasPrefix(h.Actor, actorPrefix) && (to == "" || h.To == to) {
			n++
		}
	}
	return n
}

// effectsOf returns the simulator's effects for one order.
func (it *itSystem) effectsOf(id string) []itEffect {
	var out []itEffect
	for _, e := range it.Sim.Effects() {
		if e.OrderID == id {
			out = append(out, itEffect{Method: e.Method, Path: e.Path, Key: e.Key, At: e.At})
		}
	}
	return out
}

type itEffect struct {
	Method, Path, Key string
	At                time.Time
}

// requireLedger checks the simulator's ledger against the order's records:
// at most one effect per order step and leg (grouped by order and path),
// exactly one for every step that completed and every undo that completed,
// none for an undo that never started, each under the step's stable key, and
// no effect on a path the workflow does not call.
func (it *itSystem) requireLedger(t *testing.T, v sas.OrderView) {
	t.Helper()
	id := v.Order.OrderID
	wf, ok := it.reg[v.Order.Workflow]
	require.True(t, ok, "order %s runs unknown workflow %q", id, v.Order.Workflow)
	require.Len(t, v.Steps, len(wf.Steps))
	require.Empty(t, it.Sim.Duplicates(), "keys with more than one effect")

	count := map[string]int{}
	keyOf := map[string]string{}
	for i, d := range wf.Steps {
		keyOf[itPathOf(d.Action)] = sas.IdempotencyKey(id, i, 0, false)
		if d.Undo != "" {
			keyOf[itPathOf(d.Undo)] = sas.IdempotencyKey(id, i, 0, true)
		}
	}
	for _, e := range it.effectsOf(id) {
		want, ok := keyOf[e.Path]
		require.True(t, ok, "order %s: effect on %s, which its workflow never calls", id, e.Path)
		require.Equal(t, want, e.Key, "order %s: effect on %s under the wrong idempotency key", id, e.Path)
		count[e.Path]++
	}
	for i, d := range wf.Steps {
		r := v.Steps[i]
		p := itPathOf(d.Action)
		if itEverIn(r, sas.Processed) {
			require.Equal(t, 1, count[p], "order %s step %d (%s) completed: exactly one effect on %s", id, i, d.Name, p)
		} else {
			require.LessOrEqual(t, count[p], 1, "order %s step %d (%s): at most one effect on %s", id, i, d.Name, p)
		}
		if d.Undo == "" {
			continue
		}
		u := itPathOf(d.Undo)
		switch {
		case r.ProcessState == sas.Compensated:
			require.Equal(t, 1, count[u], "order %s step %d (%s) compensated: exactly one effect on %s", id, i, d.Name, u)
		case !itEverIn(r, sas.Compensating):
			require.Zero(t, count[u], "order %s step %d (%s) never compensated: no effect on %s", id, i, d.Name, u)
		default:
			require.LessOrEqual(t, count[u], 1, "order %s step %d (%s): at most one effect on %s", id, i, d.Name, u)
		}
	}
}

// requireNoEffects checks that nothing was done for an order id.
func (it *itSystem) requireNoEffects(t *testing.T, id string) {
	t.Helper()
	require.Empty(t, it.effectsOf(id), "order %s must have no effect", id)
}

// requireNoOrder checks that an id never became an order.
func (it *itSystem) requireNoOrder(ctx context.Context, t *testing.T, id string) {
	t.Helper()
	_, err := it.Store.GetOrder(ctx, id)
	require.ErrorIs(t, err, sas.ErrNotFound, "no order %q may exist", id)
	it.requireNoEffects(t, id)
}

// alertsOf returns the alerts raised about an order.
// alertsOf returns an order's distinct alerts, oldest first. Alerts are at
// least once (a redelivered failure alerts again): copies of one alert,
// which differ only in their time, count once.
func (it *itSystem) alertsOf(id string) []sas.Alert {
	var out []sas.Alert
	seen := map[sas.Alert]bool{}
	for _, a := range it.Alerts.Alerts() {
		if a.OrderID != id {
			continue
		}
		k := a
		k.At = time.Time{}
		if !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

// itStatuses collects the status queue in the background, so scenarios that
// share a system each find their own orders' statuses.
type itStatuses struct {
	mu      sync.Mutex
	byOrder map[string][]sas.Status
	bad     []string // bodies that were not statuses
}

func (c *itStatuses) collect(ctx context.Context, sys *localrun.System) {
	for ctx.Err() == nil {
		msgs, err := sys.Queue.Receive(ctx, sas.ReceiveParams{QueueURL: sys.StatusQueueURL, Max: 10, Wait: time.Second})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		var receipts []string
		c.mu.Lock()
		for _, m := range msgs {
			var st sas.Status
			if err := json.Unmarshal([]byte(m.Body), &st); err != nil || st.Kind != sas.KindStatus {
				c.bad = append(c.bad, m.Body)
			} else {
				c.byOrder[st.OrderID] = append(c.byOrder[st.OrderID], st)
			}
			receipts = append(receipts, m.Receipt)
		}
		c.mu.Unlock()
		if len(receipts) > 0 {
			_, _ = sys.Queue.Delete(ctx, sas.DeleteParams{QueueURL: sys.StatusQueueURL, Receipts: receipts})
		}
	}
}

func (c *itStatuses) of(id string) []sas.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sas.Status(nil), c.byOrder[id]...)
}

func (c *itStatuses) notStatuses() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// statusesFor waits until the order's statuses name every event in want (as
// itRequireStatusSequence names them), and returns them all.
func (it *itSystem) statusesFor(ctx context.Context, t *testing.T, id string, want ...string) []sas.Status {
	t.Helper()
	for {
		sts := it.statuses.of(id)
		have := map[string]bool{}
		for _, s := range sts {
			have[itEventName(s)] = true
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return have[w] })
		if len(missing) == 0 {
			return sts
		}
		select {
		case <-ctx.Done():
			t.Fatalf("order %q: no status %v (have %s): %v", id, missing, itStatusLine(sts), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// itEventName names a status as itRequireStatusSequence lists them.
func itEventName(s sas.Status) string {
	if s.Step != "" {
		return s.Status + ":" + s.Step
	}
	return s.Status
}

func itStatusLine(sts []sas.Status) string {
	var parts []string
	for _, s := range sts {
		parts = append(parts, fmt.Sprintf("%s:%s@%d", s.Status, s.Step, s.Sequence))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// itRequireStatusSequence checks one order's statuses: each carries the order
// id, v1 and kind status; deliveries of the same event (a redelivered message
// posts the same number again) agree; and, in sequence order, the events are
// exactly want ("received", "step-done:charge", "processed", "failed:charge",
// "compensated", ...) with strictly increasing numbers and timestamps that
// never go back. Arrival order is not checked: a standard queue does not keep
// it, and "received" is posted after the first step is dispatched, so a fast
// agent's "step-done" may arrive first. The sequence number is what a caller
// orders by. With exact, no event may have been posted twice.
func itRequireStatusSequence(t *testing.T, id string, sts []sas.Status, exact bool, want ...string) {
	t.Helper()
	bySeq := map[int64]sas.Status{}
	for _, s := range sts {
		require.Equal(t, id, s.OrderID)
		require.Equal(t, sas.MessageVersion, s.V)
		require.Equal(t, sas.KindStatus, s.Kind)
		require.False(t, s.At.IsZero(), "status without a timestamp")
		if prev, ok := bySeq[s.Sequence]; ok {
			// SQS delivers at least once: a message handled twice posts its
			// status twice, with the same number, which is how a caller
			// de-duplicates. Copies must agree; they are not an error.
			if exact {
				t.Logf("order %s: status %s seq %d arrived twice (an at-least-once redelivery)", id, s.Status, s.Sequence)
			}
			require.Equal(t, prev.Status, s.Status, "order %s: seq %d names two events", id, s.Sequence)
			require.Equal(t, prev.Step, s.Step, "order %s: seq %d names two steps", id, s.Sequence)
			// A copy is stamped when it was posted (docs/intake.md): the
			// earliest copy is the event's own time.
			if s.At.Before(prev.At) {
				bySeq[s.Sequence] = s
			}
			continue
		}
		bySeq[s.Sequence] = s
	}
	seqs := make([]int64, 0, len(bySeq))
	for q := range bySeq {
		seqs = append(seqs, q)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var got []string
	var prevAt time.Time
	for i, q := range seqs {
		s := bySeq[q]
		name := itEventName(s)
		got = append(got, name)
		if i > 0 {
			require.Greater(t, q, seqs[i-1])
			require.False(t, s.At.Before(prevAt), "order %s: %s (seq %d) is stamped before the event numbered before it", id, name, q)
		}
		prevAt = s.At
		if s.Status == sas.StatusFailed || s.Status == sas.StatusRejected {
			require.NotEmpty(t, s.Reason, "order %s: a %s status carries a reason", id, s.Status)
		}
	}
	require.Equal(t, want, got, "order %s: statuses in sequence order (as received: %s)", id, itStatusLine(sts))
}

// itLogs captures a system's JSON log lines.
type itLogs struct{ logtest.Buffer }

// matching returns the raw lines that contain s.
func (l *itLogs) matching(s string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// dropReasons returns the reasons of the scheduler's "message dropped" lines.
// rejectedMessages is the set of message ids whose intake was rejected:
// SQS delivers at least once, so one message may be rejected twice.
func (l *itLogs) rejectedMessages() map[string]bool {
	out := map[string]bool{}
	for _, r := range l.Records("message dropped") {
		reason, _ := r["reason"].(string)
		id, _ := r["messageId"].(string)
		if strings.HasPrefix(reason, "intake rejected") {
			out[id] = true
		}
	}
	return out
}

func (l *itLogs) dropReasons() []string {
	var out []string
	for _, r := range l.Records("message dropped") {
		if s, ok := r["reason"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Hand driving: receive from a queue yourself and invoke handlers.

// recvNow takes what a queue holds right now (short polls until one comes
// back empty) and deletes it, as a poller that acknowledged it would.
func (it *itSystem) recvNow(ctx context.Context, t *testing.T, url string) []string {
	t.Helper()
	var bodies []string
	for {
		msgs, err := it.Queue.Receive(ctx, sas.ReceiveParams{QueueURL: url, Max: 10})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return bodies
		}
		var receipts []string
		for _, m := range msgs {
			bodies = append(bodies, m.Body)
			receipts = append(receipts, m.Receipt)
		}
		res, err := it.Queue.Delete(ctx, sas.DeleteParams{QueueURL: url, Receipts: receipts})
		require.NoError(t, err)
		require.Empty(t, res.Failed)
	}
}

// recvN waits until n messages about order id have been taken from a queue,
// and returns them. Messages about other orders (left over by a scenario
// that failed before it drained its queues) are taken and dropped, so one
// failure does not cascade into the next scenario.
func (it *itSystem) recvN(ctx context.Context, t *testing.T, url, id string, n int) []string {
	t.Helper()
	var bodies []string
	for len(bodies) < n {
		for _, b := range it.recvNow(ctx, t, url) {
			if h, err := sas.DecodeHeader([]byte(b)); err == nil && h.OrderID == id {
				bodies = append(bodies, b)
			} else {
				t.Logf("dropped a message that is not about %s: %.200s", id, b)
			}
		}
		if len(bodies) >= n {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %d messages about %s on %s, got %d: %v", n, id, url, len(bodies), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return bodies
}

// itDeliver invokes a handler with bodies as one event and requires every
// record acknowledged.
func itDeliver(ctx context.Context, t *testing.T, h poller.SQSHandler, bodies ...string) {
	t.Helper()
	if len(bodies) == 0 {
		return
	}
	resp, err := localrun.Invoke(ctx, h, bodies...)
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures, "a nil batchItemFailures list")
	require.Empty(t, resp.BatchItemFailures, "records reported for redelivery")
}

// itRedeliver invokes a handler with bodies as one event of redelivered
// records (localrun.Redeliver) and requires every record acknowledged.
func itRedeliver(ctx context.Context, t *testing.T, h poller.SQSHandler, bodies ...string) {
	t.Helper()
	resp, err := localrun.Redeliver(ctx, h, bodies...)
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures, "a nil batchItemFailures list")
	require.Empty(t, resp.BatchItemFailures, "records reported for redelivery")
}

// pickedUp records what an agent's "started" report would (the
// scheduler's Start write): the held attempt of id's first step was
// picked up now and must finish within d. The tests whose agent takes a
// request and dies or hangs use it: past that deadline the supervisor
// counts a failure, where a step whose pick-up was never reported waits
// for its request's delivery horizon (docs/protocol.md, "Deadlines start
// at pick-up").
func (s *itSystem) pickedUp(ctx context.Context, t *testing.T, id string, d time.Duration) {
	t.Helper()
	v, err := s.Store.GetOrder(ctx, id)
	require.NoError(t, err)
	r := v.Steps[0]
	now := time.Now().UTC()
	_, err = s.Store.Start(ctx, sas.StartParams{Key: r.Key(), From: r.ProcessState, Owner: r.LockedBy, Attempt: r.Attempt,
		Now: now, CompleteBy: now.Add(d)})
	require.NoError(t, err)
}

// itKindOf reads a message's kind.
func itKindOf(t *testing.T, body string) sas.Kind {
	t.Helper()
	h, err := sas.DecodeHeader([]byte(body))
	require.NoError(t, err)
	return h.Kind
}

// itDeliverAgain invokes a handler with bodies as one event and delivers the
// records it reports failed again, as SQS would after their visibility
// timeout, until every one is acknowledged. It runs on goroutines of its
// own, so it returns what went wrong rather than failing the test.
func itDeliverAgain(ctx context.Context, h poller.SQSHandler, bodies ...string) error {
	for round := 0; len(bodies) > 0; round++ {
		if round == 5 {
			return fmt.Errorf("records still failing after %d deliveries: %q", round, bodies)
		}
		resp, err := localrun.Invoke(ctx, h, bodies...)
		if err != nil {
			return err
		}
		if resp.BatchItemFailures == nil {
			return errors.New("a nil batchItemFailures list")
		}
		var again []string
		for _, f := range resp.BatchItemFailures {
			var i int
			if _, err := fmt.Sscanf(f.ItemIdentifier, "hand-%d", &i); err != nil {
				return fmt.Errorf("batch item failure %q: %w", f.ItemIdentifier, err)
			}
			again = append(again, bodies[i])
		}
		bodies = again
	}
	return nil
}

// pump delivers what the scheduler and agent queues hold, batch by batch, to
// instance 0, until done holds with both queues empty. With dup, every
// distinct body is also delivered to instance 1 (another Lambda instance)
// at the same moment, as an at-least-once queue may; a record either
// instance reports failed (two writers racing for one item) is delivered
// again.
func (it *itSystem) pump(ctx context.Context, t *testing.T, dup bool, done func() bool) {
	t.Helper()
	seen := map[string]bool{}
	for {
		n := 0
		for _, q := range []struct {
			url string
			hs  [2]poller.SQSHandler
		}{
			{it.Config.SchedulerQueueURL, [2]poller.SQSHandler{it.ByKind(it.Schedulers[0].Handle), it.ByKind(it.Schedulers[1].Handle)}},
			{it.Config.ControlQueueURL, [2]poller.SQSHandler{it.ByKind(it.Schedulers[0].Handle), it.ByKind(it.Schedulers[1].Handle)}},
			{it.Config.AgentQueueURL, [2]poller.SQSHandler{it.Agents[0].Handle, it.Agents[1].Handle}},
		} {
			bodies := it.recvNow(ctx, t, q.url)
			n += len(bodies)
			var again []string
			if dup {
				for _, b := range bodies {
					if !seen[b] {
						seen[b] = true
						again = append(again, b)
					}
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, batch := range [][]string{bodies, again} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = itDeliverAgain(ctx, q.hs[i], batch...)
				}()
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
		}
		if n == 0 && done() {
			return
		}
		if n == 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("pumping: %v", ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// orderDone is a pump condition: the order's steps are in these states.
func (it *itSystem) orderDone(ctx context.Context, id string, want ...sas.ProcessState) func() bool {
	return func() bool {
		v, err := it.Store.GetOrder(ctx, id)
		return err == nil && itStates(want...)(v)
	}
}

// runInBackground runs sys until the returned stop is called; stop waits
// for Run to return.
func runInBackground(ctx context.Context, sys *localrun.System) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sys.Run(runCtx); close(done) }()
	return func() { cancel(); <-done }
}

// paymentIntakes are n single-step payment orders named after the run and
// tag, with their ids.
func paymentIntakes(sys *localrun.System, tag string, n int) (ids []string, batch []sas.Intake) {
	for i := range n {
		id := fmt.Sprintf("%s-%s-%04d", sys.Opts.Name, tag, i)
		ids = append(ids, id)
		batch = append(batch, sas.Intake{OrderID: id, Workflow: registry.Payment, Payload: []byte(`{"amount":10}`)})
	}
	return ids, batch
}
