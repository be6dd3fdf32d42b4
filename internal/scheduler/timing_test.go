package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// timed is rep with the run timing an agent measured.
func timed(body string, queued, ran time.Duration) string {
	var rep sas.AgentReply
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		panic(err)
	}
	rep.QueuedMs, rep.RanMs = sas.MillisOf(queued), sas.MillisOf(ran)
	return sas.Encode(rep)
}

// The queue wait and execution time an agent reports in its reply are
// recorded in the history entry of the transition the reply makes (done,
// transient, failed), for the console; a reply without them (an older
// agent) records none. They change nothing else: the same writes, the same
// store calls.
func TestTheReplysRunTimingIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-tm", "order", f.replyURL))
	req := f.request()
	f.calls.take()

	f.deliver(timed(done(req), 1200*time.Millisecond, 340*time.Millisecond))
	calls, _ := f.calls.take()
	require.Equal(t, map[string]int{"Complete": 1}, calls, "the happy path still reads nothing")
	newest := func(step int) sas.HistoryEntry {
		hs := f.view("o-tm").Steps[step].History
		return hs[len(hs)-1]
	}
	require.Equal(t, sas.Processed, newest(0).To)
	require.Equal(t, sas.RunTiming{Queued: sas.MillisOf(1200 * time.Millisecond), Ran: sas.MillisOf(340 * time.Millisecond)}, newest(0).Run)

	next := f.request()
	f.deliver(timed(transient(next, "Timeout", "no answer"), 0, 30*time.Second))
	rescued := f.view("o-tm").Steps[1].History
	var handBack sas.HistoryEntry
	for _, h := range rescued {
		if h.From == sas.Processing && h.To == sas.Pending {
			handBack = h
		}
	}
	require.Equal(t, sas.RunTiming{Queued: sas.MillisOf(0), Ran: sas.MillisOf(30 * time.Second)}, handBack.Run, "transient: the failed attempt's run, a 0 wait included")
	require.False(t, newest(1).Run.Known(), "the next attempt's claim has none")

	again, _ := f.nextRequest()
	f.deliver(reply(again, sas.OutcomeFailed, "refused")) // an agent built before the fields
	failed := 0
	for _, h := range f.view("o-tm").Steps[1].History {
		if h.To == sas.Error {
			failed++
			require.False(t, h.Run.Known(), "none reported, none recorded")
		}
	}
	require.Equal(t, 1, failed)
}
