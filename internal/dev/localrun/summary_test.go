package localrun

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The summary reads rescues per order in two: attempts that ran and whose
// agent went quiet, and re-drives of steps none of whose attempts ran (a
// queue's backlog, a lost request), which count no failure (issue 31).
func TestSummarySplitsRescues(t *testing.T) {
	var b strings.Builder
	printSummary(&b, Summary{Submitted: 200, Rescues: 14, NothingRan: 10, GaveUp: 1})
	out := b.String()
	require.Contains(t, out, "14 rescues of stuck or stranded steps (0.07 per order), 1 gave up")
	require.Contains(t, out, "of attempts that ran  4 (0.02 per order)")
	require.Contains(t, out, "of steps none ran     10 (0.05 per order)")
}

// The summary says when the remote was down, and whether it came back
// before the run ended; a run without an outage says nothing of one.
func TestSummaryTellsTheOutage(t *testing.T) {
	var b strings.Builder
	printSummary(&b, Summary{Submitted: 10})
	require.NotContains(t, b.String(), "remote outage")

	b.Reset()
	printSummary(&b, Summary{Submitted: 10, OutageFrom: 60 * time.Second, OutageTo: 150 * time.Second})
	require.Contains(t, b.String(), "remote outage           every call answered 503 from 60.0s to 150.0s after submission")

	b.Reset()
	printSummary(&b, Summary{Submitted: 10, OutageFrom: 60 * time.Second})
	require.Contains(t, b.String(), "from 60.0s to the end of the run (it was still down)")
}
