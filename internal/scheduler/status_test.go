package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// The sequence numbers of every status an order can see, in the order the
// events can happen, grow strictly: forward steps (one failing, resubmitted,
// and done), then undos newest first (one failing, retried), then the end.
func TestStatusSequenceGrows(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 6; n++ {
		seqs := []int64{scheduler.SeqRejected, scheduler.SeqReceived()}
		for i := 0; i < n; i++ {
			seqs = append(seqs, scheduler.SeqFailed(i, 1), scheduler.SeqFailed(i, 2), scheduler.SeqStepDone(i, 3))
		}
		seqs = append(seqs, scheduler.SeqProcessed(n))
		for i := n - 1; i >= 0; i-- {
			seqs = append(seqs, scheduler.SeqUndoFailed(n, i, 4), scheduler.SeqUndoFailed(n, i, 5))
		}
		seqs = append(seqs, scheduler.SeqCompensated(n))
		for i := 1; i < len(seqs); i++ {
			require.Greater(t, seqs[i], seqs[i-1], "n=%d, position %d", n, i)
		}
	}
	require.Equal(t, scheduler.SeqStepDone(0, 999), scheduler.SeqStepDone(0, 5000), "attempts are capped inside their slot")
	require.Less(t, scheduler.SeqStepDone(0, 5000), scheduler.SeqFailed(1, 0))
}

// A caller whose queue is gone does not hold its order up.
func TestStatusToMissingQueueIsSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-gone", "payment", f.replyURL))
	req := f.request()
	require.NoError(t, f.q.DeleteQueue(f.ctx, f.replyURL))
	f.deliver(done(req))
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-gone"))
}

// A status the caller's queue cannot take right now is retried with the
// message; the redelivery posts the same status with the same number.
func TestStatusSendFailureIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-slow", "payment", f.replyURL))
	req := f.request()
	f.statuses()
	ev := f.event(done(req))
	f.failNextSends(f.replyURL, 1)
	require.Len(t, f.handle(ev), 1)
	require.Equal(t, []sas.ProcessState{sas.Processed}, f.states("o-slow"))
	require.Empty(t, f.handle(ev))
	require.Equal(t, []string{"step-done/charge#3001", "processed#4000"}, statusList(f.statuses()))
}
