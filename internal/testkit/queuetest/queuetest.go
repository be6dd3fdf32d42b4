// Package queuetest is the contract every sas.Queue adapter passes: the same
// tests run against the in-memory queue and against SQS (an emulator, or AWS).
// An adapter's test calls Run with a Backend that makes fresh queues.
package queuetest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Spec asks for a queue.
type Spec struct {
	// MaxReceiveCount > 0: the queue has a dead-letter queue and moves a
	// message there after this many receives without a delete.
	MaxReceiveCount int
}

// Fixture is one fresh, empty queue (and its dead-letter queue) on a backend,
// for one test.
type Fixture struct {
	Queue      sas.Queue
	URL        string
	DLQURL     string // set when Spec.MaxReceiveCount > 0
	MissingURL string // a well-formed URL of a queue that does not exist
	// Advance lets d pass on a backend whose time is a fake clock. Nil means
	// real time passes (an emulator or AWS): the suite then waits for
	// messages with a bounded loop of 1 s long polls.
	Advance func(d time.Duration)
}

// Backend is an adapter under test.
type Backend struct {
	// Name is the subtest name: "memory", "sqs-elasticmq", "sqs-moto", ...
	Name string
	// New makes a fresh queue as the spec asks, cleaning it up with t.Cleanup.
	New func(t *testing.T, s Spec) Fixture
	// ExactReceiveCount: InboundMessage.ReceiveCount is exact. Emulators do not
	// report it reliably (docs/pattern.md §7), so by default it is not checked.
	ExactReceiveCount bool
	// Quirks are the emulator's known departures from SQS's documented
	// behaviour: case name (as in the subtest) to the reason, which names the
	// emulator and what SQS does. Such a case is skipped on this backend
	// only, with that reason; never set one for real SQS.
	Quirks map[string]string
}

// Run runs the contract against b, as subtest b.Name.
func Run(t *testing.T, b Backend) {
	t.Helper()
	for name := range b.Quirks {
		if !slices.ContainsFunc(cases, func(c testCase) bool { return c.name == name }) {
			t.Fatalf("backend %s: quirk for unknown case %q", b.Name, name)
		}
	}
	t.Run(b.Name, func(t *testing.T) {
		t.Parallel()
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if reason, ok := b.Quirks[c.name]; ok {
					t.Skip("emulator quirk: " + reason)
				}
				c.run(t, b)
			})
		}
	})
}

type testCase struct {
	name string
	run  func(*testing.T, Backend)
}

var cases = []testCase{
	{"RoundTrip", testRoundTrip},
	{"BatchOf25TakesThreeRequests", testBatchOf25},
	{"BatchSplitsBySize", testBatchSplitsBySize},
	{"PerEntryFailures", testPerEntryFailures},
	{"InvalidParameters", testInvalidParameters},
	{"VisibilityHidesThenReveals", testVisibilityHidesThenReveals},
	{"ChangeVisibilityZeroReveals", testChangeVisibilityZero},
	{"ChangeVisibilityExtends", testChangeVisibilityExtends},
	{"StaleReceiptDelete", testStaleReceiptDelete},
	{"StaleReceiptChangeVisibility", testStaleReceiptChangeVisibility},
	{"InvalidReceipt", testInvalidReceipt},
	{"NotLostWhenNotDeleted", testNotLostWhenNotDeleted},
	{"DuplicateDelivery", testDuplicateDelivery},
	{"Delay", testDelay},
	{"DepthCountsEveryMessage", testDepth},
	{"DeadLetterQueue", testDeadLetterQueue},
	{"UnknownQueue", testUnknownQueue},
}

// Real-time waits. A 2 s visibility leaves room for a slow machine between a
// receive and the check that the message is hidden.
const (
	shortVisibility = 2 * time.Second
	longVisibility  = 60 * time.Second
	pollSlack       = 6 // extra 1 s long polls allowed beyond the expected wait
)

func ctx(t *testing.T) context.Context { return t.Context() }

func send(t *testing.T, f Fixture, url string, msgs ...sas.OutboundMessage) sas.SendResult {
	t.Helper()
	res, err := f.Queue.Send(ctx(t), sas.SendParams{QueueURL: url, Messages: msgs})
	require.NoError(t, err)
	require.Empty(t, res.Failed, "send failures")
	return res
}

func msg(id, body string) sas.OutboundMessage { return sas.OutboundMessage{ID: id, Body: body} }

// receiveNow receives without waiting: on a real backend, what is visible now.
func receiveNow(t *testing.T, f Fixture, url string, vis time.Duration) []sas.InboundMessage {
	t.Helper()
	got, err := f.Queue.Receive(ctx(t), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: vis})
	require.NoError(t, err)
	return got
}

// requireHidden asserts that nothing is visible now.
func requireHidden(t *testing.T, f Fixture, url string) {
	t.Helper()
	got := receiveNow(t, f, url, longVisibility)
	require.Empty(t, got, "expected no visible message")
}

// receiveAfter lets d pass and receives until it has n messages: on a fake
// clock it advances the clock and receives at once; in real time it long-polls
// in 1 s slices, a bounded number of times.
func receiveAfter(t *testing.T, f Fixture, url string, d time.Duration, n int, vis time.Duration) []sas.InboundMessage {
	t.Helper()
	if f.Advance != nil {
		f.Advance(d)
	}
	polls := int(d/time.Second) + pollSlack + n
	var got []sas.InboundMessage
	for i := 0; i < polls && len(got) < n; i++ {
		p := sas.ReceiveParams{QueueURL: url, Max: min(10, n-len(got)), Visibility: vis}
		if f.Advance == nil {
			p.Wait = time.Second
		}
		batch, err := f.Queue.Receive(ctx(t), p)
		require.NoError(t, err)
		got = append(got, batch...)
	}
	require.Len(t, got, n, "messages received after %s", d)
	return got
}

func receive(t *testing.T, f Fixture, url string, n int, vis time.Duration) []sas.InboundMessage {
	t.Helper()
	return receiveAfter(t, f, url, 0, n, vis)
}

func deleteAll(t *testing.T, f Fixture, url string, msgs ...sas.InboundMessage) sas.DeleteResult {
	t.Helper()
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	res, err := f.Queue.Delete(ctx(t), sas.DeleteParams{QueueURL: url, Receipts: receipts})
	require.NoError(t, err)
	require.Empty(t, res.Failed, "delete failures")
	return res
}

func bodies(msgs []sas.InboundMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	sort.Strings(out)
	return out
}

func testRoundTrip(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	body := `{"v":1,"orderId":"o-1","note":"żółw ✓ \t tab"}`
	res := send(t, f, f.URL, msg("a", body))
	assert.Equal(t, 1, res.Requests, "one message is one SendMessage")

	got := receive(t, f, f.URL, 1, longVisibility)
	m := got[0]
	assert.Equal(t, body, m.Body)
	assert.NotEmpty(t, m.MessageID)
	assert.NotEmpty(t, m.Receipt)
	assert.False(t, m.SentAt.IsZero(), "SentAt from the SentTimestamp attribute")
	if b.ExactReceiveCount {
		assert.Equal(t, 1, m.ReceiveCount)
	}

	del := deleteAll(t, f, f.URL, m)
	assert.Equal(t, 1, del.Requests, "one receipt is one DeleteMessage")

	// Deleted: it does not come back when its visibility would have ended.
	if f.Advance != nil {
		f.Advance(2 * longVisibility)
	}
	requireHidden(t, f, f.URL)
}

func testBatchOf25(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	var msgs []sas.OutboundMessage
	var want []string
	for i := range 25 {
		body := fmt.Sprintf(`{"n":%02d}`, i)
		msgs = append(msgs, msg(fmt.Sprintf("m%d", i), body))
		want = append(want, body)
	}
	res := send(t, f, f.URL, msgs...)
	assert.Equal(t, 3, res.Requests, "25 messages are batches of 10, 10 and 5")

	got := receive(t, f, f.URL, 25, longVisibility)
	sort.Strings(want)
	assert.Equal(t, want, bodies(got))

	del := deleteAll(t, f, f.URL, got...)
	assert.Equal(t, 3, del.Requests, "25 receipts are batches of 10, 10 and 5")
	requireHidden(t, f, f.URL)
}

func testBatchSplitsBySize(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	// Three 100 KiB bodies do not fit one 256 KiB batch: two requests.
	var msgs []sas.OutboundMessage
	for i := range 3 {
		msgs = append(msgs, msg(fmt.Sprint(i), fmt.Sprintf("%d", i)+strings.Repeat("x", 100*1024-1)))
	}
	res := send(t, f, f.URL, msgs...)
	assert.Equal(t, 2, res.Requests)

	got := receive(t, f, f.URL, 3, longVisibility)
	for _, m := range got {
		assert.Len(t, m.Body, 100*1024)
	}
}

func testPerEntryFailures(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	res, err := f.Queue.Send(ctx(t), sas.SendParams{QueueURL: f.URL, Messages: []sas.OutboundMessage{
		msg("ok1", "first"),
		{ID: "late", Body: "too late", Delay: 16 * time.Minute},
		msg("big", strings.Repeat("x", 256*1024+1)),
		msg("nul", "a\x00b"),
		msg("empty", ""),
		msg("ok2", "second"),
	}})
	require.NoError(t, err, "bad messages are reported alone, not as a failed call")
	assert.Equal(t, 1, res.Requests, "the two good messages go in one batch")
	failed := map[string]sas.SendFailure{}
	for _, fl := range res.Failed {
		failed[fl.ID] = fl
	}
	require.Len(t, failed, 4, "failures: %+v", res.Failed)
	for _, id := range []string{"late", "big", "nul", "empty"} {
		fl, ok := failed[id]
		if assert.True(t, ok, "failure for %s", id) {
			assert.True(t, fl.SenderFault, "%s: retrying will not help", id)
			assert.NotEmpty(t, fl.Code, id)
			assert.NotEmpty(t, fl.Message, id)
		}
	}
	got := receive(t, f, f.URL, 2, longVisibility)
	assert.Equal(t, []string{"first", "second"}, bodies(got))

	// One bad message alone is reported the same way, with no request sent.
	res, err = f.Queue.Send(ctx(t), sas.SendParams{QueueURL: f.URL, Messages: []sas.OutboundMessage{
		{ID: "late", Body: "x", Delay: 15*time.Minute + time.Second},
	}})
	require.NoError(t, err)
	assert.Equal(t, 0, res.Requests)
	require.Len(t, res.Failed, 1)
	assert.Equal(t, "late", res.Failed[0].ID)
	assert.True(t, res.Failed[0].SenderFault)

	// A delete batch reports a bad receipt alone; the good one is deleted.
	send(t, f, f.URL, msg("c", "third"))
	third := receive(t, f, f.URL, 1, longVisibility)
	dres, err := f.Queue.Delete(ctx(t), sas.DeleteParams{QueueURL: f.URL, Receipts: []string{"not-a-receipt", third[0].Receipt}})
	require.NoError(t, err)
	assert.Equal(t, 1, dres.Requests)
	require.Len(t, dres.Failed, 1)
	assert.Equal(t, "not-a-receipt", dres.Failed[0].ID)
	assert.True(t, dres.Failed[0].SenderFault)
	assert.NotEmpty(t, dres.Failed[0].Code)
	// The deleted one does not come back.
	if f.Advance != nil {
		f.Advance(2 * longVisibility)
	}
	for _, m := range receiveNow(t, f, f.URL, longVisibility) {
		assert.NotEqual(t, "third", m.Body, "deleted in the batch with a bad receipt")
	}
}

func testInvalidParameters(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	q, c := f.Queue, ctx(t)
	checks := map[string]error{}

	_, checks["send without URL"] = q.Send(c, sas.SendParams{Messages: []sas.OutboundMessage{msg("a", "x")}})
	_, checks["send with an empty ID"] = q.Send(c, sas.SendParams{QueueURL: f.URL, Messages: []sas.OutboundMessage{msg("", "x")}})
	_, checks["send with a repeated ID"] = q.Send(c, sas.SendParams{QueueURL: f.URL,
		Messages: []sas.OutboundMessage{msg("a", "x"), msg("a", "y")}})
	_, checks["receive without URL"] = q.Receive(c, sas.ReceiveParams{Max: 1})
	_, checks["receive 11"] = q.Receive(c, sas.ReceiveParams{QueueURL: f.URL, Max: 11})
	_, checks["receive -1"] = q.Receive(c, sas.ReceiveParams{QueueURL: f.URL, Max: -1})
	_, checks["wait 21s"] = q.Receive(c, sas.ReceiveParams{QueueURL: f.URL, Max: 1, Wait: 21 * time.Second})
	_, checks["visibility 13h"] = q.Receive(c, sas.ReceiveParams{QueueURL: f.URL, Max: 1, Visibility: 13 * time.Hour})
	_, checks["delete without URL"] = q.Delete(c, sas.DeleteParams{Receipts: []string{"r"}})
	checks["change visibility without receipt"] = q.ChangeVisibility(c, sas.ChangeVisibilityParams{QueueURL: f.URL, Timeout: time.Second})

	send(t, f, f.URL, msg("a", "x"))
	m := receive(t, f, f.URL, 1, longVisibility)[0]
	checks["change visibility 13h"] = q.ChangeVisibility(c, sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: m.Receipt, Timeout: 13 * time.Hour})
	checks["change visibility -1s"] = q.ChangeVisibility(c, sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: m.Receipt, Timeout: -time.Second})

	for name, err := range checks {
		assert.ErrorIs(t, err, sas.ErrInvalid, name)
	}

	// Nothing to do is not an error.
	res, err := q.Send(c, sas.SendParams{QueueURL: f.URL})
	require.NoError(t, err)
	assert.Equal(t, sas.SendResult{}, res)
	dres, err := q.Delete(c, sas.DeleteParams{QueueURL: f.URL})
	require.NoError(t, err)
	assert.Equal(t, sas.DeleteResult{}, dres)
}

func testVisibilityHidesThenReveals(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "hide me"))
	first := receive(t, f, f.URL, 1, shortVisibility)[0]

	requireHidden(t, f, f.URL)

	again := receiveAfter(t, f, f.URL, shortVisibility, 1, longVisibility)[0]
	assert.Equal(t, first.MessageID, again.MessageID)
	assert.Equal(t, "hide me", again.Body)
	assert.NotEqual(t, first.Receipt, again.Receipt, "each receive has its own receipt")
	if b.ExactReceiveCount {
		assert.Equal(t, 2, again.ReceiveCount)
	}
}

func testChangeVisibilityZero(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "release me"))
	m := receive(t, f, f.URL, 1, longVisibility)[0]
	requireHidden(t, f, f.URL)

	require.NoError(t, f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: m.Receipt}))

	// Visible again at once, without the 60 s visibility passing.
	again := receive(t, f, f.URL, 1, longVisibility)[0]
	assert.Equal(t, m.MessageID, again.MessageID)
}

func testChangeVisibilityExtends(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "keep me"))
	m := receive(t, f, f.URL, 1, shortVisibility)[0]
	require.NoError(t, f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{
		QueueURL: f.URL, Receipt: m.Receipt, Timeout: longVisibility}))

	// Past the original 2 s, still hidden.
	if f.Advance != nil {
		f.Advance(2 * shortVisibility)
		requireHidden(t, f, f.URL)
	} else {
		for range 4 {
			got, err := f.Queue.Receive(ctx(t), sas.ReceiveParams{QueueURL: f.URL, Max: 1, Wait: time.Second, Visibility: longVisibility})
			require.NoError(t, err)
			require.Empty(t, got, "extended message became visible")
		}
	}
	// The holder still deletes it with its receipt.
	deleteAll(t, f, f.URL, m)
}

// A consumer whose visibility ran out deletes with its old receipt after
// another consumer received the message. SQS accepts the call and "might
// not" delete the message; the current holder's delete always works.
func testStaleReceiptDelete(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "stale"))
	slow := receive(t, f, f.URL, 1, shortVisibility)[0]
	fast := receiveAfter(t, f, f.URL, shortVisibility, 1, longVisibility)[0]
	require.Equal(t, slow.MessageID, fast.MessageID)
	require.NotEqual(t, slow.Receipt, fast.Receipt)

	res, err := f.Queue.Delete(ctx(t), sas.DeleteParams{QueueURL: f.URL, Receipts: []string{slow.Receipt}})
	require.NoError(t, err, "a stale receipt is not an error")
	assert.Empty(t, res.Failed, "a stale receipt is not a failed entry")

	deleteAll(t, f, f.URL, fast)
	if f.Advance != nil {
		f.Advance(2 * longVisibility)
	}
	requireHidden(t, f, f.URL)
}

// A consumer whose visibility ran out must not move the message another
// consumer now holds: its heartbeat fails with ErrLostRace.
func testStaleReceiptChangeVisibility(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "held"))
	slow := receive(t, f, f.URL, 1, shortVisibility)[0]
	fast := receiveAfter(t, f, f.URL, shortVisibility, 1, longVisibility)[0]
	require.NotEqual(t, slow.Receipt, fast.Receipt)

	err := f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: slow.Receipt})
	require.ErrorIs(t, err, sas.ErrLostRace)
	requireHidden(t, f, f.URL)

	deleteAll(t, f, f.URL, fast)
	err = f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: fast.Receipt, Timeout: time.Second})
	require.ErrorIs(t, err, sas.ErrLostRace, "the message is gone")
}

func testInvalidReceipt(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	res, err := f.Queue.Delete(ctx(t), sas.DeleteParams{QueueURL: f.URL, Receipts: []string{"not-a-receipt"}})
	require.NoError(t, err, "a bad receipt is a failed entry, not a failed call")
	assert.Equal(t, 1, res.Requests)
	require.Len(t, res.Failed, 1)
	assert.Equal(t, "not-a-receipt", res.Failed[0].ID)
	assert.True(t, res.Failed[0].SenderFault)

	err = f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: "not-a-receipt", Timeout: time.Second})
	assert.ErrorIs(t, err, sas.ErrInvalid)
}

// A consumer that dies before deleting does not lose the message.
func testNotLostWhenNotDeleted(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", "survive"), msg("b", "me too"))
	crashed := receive(t, f, f.URL, 2, shortVisibility)
	requireHidden(t, f, f.URL)

	back := receiveAfter(t, f, f.URL, shortVisibility, 2, longVisibility)
	assert.Equal(t, bodies(crashed), bodies(back))
	deleteAll(t, f, f.URL, back...)
}

// Delivery is at least once: the same message can reach two consumers, each
// with its own receipt, so the work a message triggers must be idempotent,
// keyed on its content (the order and step), never on the receipt.
func testDuplicateDelivery(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, msg("a", `{"orderId":"o-1","step":0}`))
	first := receive(t, f, f.URL, 1, shortVisibility)[0]
	second := receiveAfter(t, f, f.URL, shortVisibility, 1, longVisibility)[0]

	assert.Equal(t, first.MessageID, second.MessageID)
	assert.Equal(t, first.Body, second.Body)
	assert.NotEqual(t, first.Receipt, second.Receipt)

	// Both consumers finish and delete; neither delete is an error.
	res, err := f.Queue.Delete(ctx(t), sas.DeleteParams{QueueURL: f.URL, Receipts: []string{second.Receipt, first.Receipt}})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
	if f.Advance != nil {
		f.Advance(2 * longVisibility)
	}
	requireHidden(t, f, f.URL)
}

func testDelay(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	send(t, f, f.URL, sas.OutboundMessage{ID: "a", Body: "later", Delay: 2 * time.Second}, msg("b", "now"))
	now := receive(t, f, f.URL, 1, longVisibility)
	assert.Equal(t, "now", now[0].Body)
	requireHidden(t, f, f.URL)

	later := receiveAfter(t, f, f.URL, 2*time.Second, 1, longVisibility)
	assert.Equal(t, "later", later[0].Body)
}

// After MaxReceiveCount receives without a delete, the next receive moves the
// message to the dead-letter queue instead of delivering it.
func testDeadLetterQueue(t *testing.T, b Backend) {
	f := b.New(t, Spec{MaxReceiveCount: 2})
	require.NotEmpty(t, f.DLQURL)
	send(t, f, f.URL, msg("a", "poison"))
	for i := range 2 {
		m := receive(t, f, f.URL, 1, longVisibility)[0]
		require.Equal(t, "poison", m.Body, "receive %d", i+1)
		// Give it back at once; the receive still counts.
		require.NoError(t, f.Queue.ChangeVisibility(ctx(t), sas.ChangeVisibilityParams{QueueURL: f.URL, Receipt: m.Receipt}))
	}
	// The receive that moves it (a long poll on real SQS, whose short polls
	// sample only some servers) gets nothing.
	p := sas.ReceiveParams{QueueURL: f.URL, Max: 10, Visibility: longVisibility}
	if f.Advance == nil {
		p.Wait = time.Second
	}
	got, err := f.Queue.Receive(ctx(t), p)
	require.NoError(t, err)
	require.Empty(t, got, "a third delivery")

	dead := receive(t, f, f.DLQURL, 1, longVisibility)
	assert.Equal(t, "poison", dead[0].Body)
}

func testUnknownQueue(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	q, c, url := f.Queue, ctx(t), f.MissingURL
	require.NotEmpty(t, url)

	_, err := q.Send(c, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{msg("a", "x")}})
	assert.ErrorIs(t, err, sas.ErrNotFound, "send one")
	_, err = q.Send(c, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{msg("a", "x"), msg("b", "y")}})
	assert.ErrorIs(t, err, sas.ErrNotFound, "send batch")
	_, err = q.Receive(c, sas.ReceiveParams{QueueURL: url, Max: 1})
	assert.ErrorIs(t, err, sas.ErrNotFound, "receive")
	_, err = q.Delete(c, sas.DeleteParams{QueueURL: url, Receipts: []string{"r"}})
	assert.ErrorIs(t, err, sas.ErrNotFound, "delete one")
	_, err = q.Delete(c, sas.DeleteParams{QueueURL: url, Receipts: []string{"r1", "r2"}})
	assert.ErrorIs(t, err, sas.ErrNotFound, "delete batch")
	err = q.ChangeVisibility(c, sas.ChangeVisibilityParams{QueueURL: url, Receipt: "r", Timeout: time.Second})
	assert.ErrorIs(t, err, sas.ErrNotFound, "change visibility")
	if err != nil {
		assert.Contains(t, err.Error(), url, "errors name the queue")
	}
}

// Depth counts what the queue holds, split as SQS splits it: waiting,
// received and not deleted, delayed. The supervisor reads it to tell a
// waiting request from a lost one (docs/protocol.md, "Waiting is not
// executing"). SQS's counts are approximate and lag by seconds, so the
// suite waits (boundedly) for the counts to settle.
func testDepth(t *testing.T, b Backend) {
	f := b.New(t, Spec{})
	dr, ok := f.Queue.(sas.DepthReader)
	require.True(t, ok, "%T does not read a queue's depth", f.Queue)
	d, err := dr.Depth(ctx(t), f.URL)
	require.NoError(t, err)
	require.Zero(t, d.Total(), "a new queue is empty: %+v", d)

	send(t, f, f.URL, msg("a", "one"), msg("b", "two"), sas.OutboundMessage{ID: "c", Body: "later", Delay: 10 * time.Minute})
	receive(t, f, f.URL, 1, longVisibility)
	want := sas.QueueDepth{Visible: 1, InFlight: 1, Delayed: 1}
	for i := 0; ; i++ {
		d, err = dr.Depth(ctx(t), f.URL)
		require.NoError(t, err)
		if d == want || i == 20 || f.Advance != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(t, want, d)

	_, err = dr.Depth(ctx(t), f.MissingURL)
	require.ErrorIs(t, err, sas.ErrNotFound)
}
