package sas

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTraceContext(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	tr := NewTrace("o-1", at)
	require.True(t, ValidTrace(tr), tr)
	require.Equal(t, tr, NewTrace("o-1", at), "the same intake, the same context")
	require.NotEqual(t, TraceID(tr), TraceID(NewTrace("o-2", at)))
	require.Equal(t, fmt.Sprintf("%08x", at.Unix()), TraceID(tr)[:8], "the time in seconds first, as X-Ray's trace ids")

	child := ChildTrace(tr, "agent.request o-1:0 1")
	require.True(t, ValidTrace(child))
	require.Equal(t, TraceID(tr), TraceID(child), "one order, one trace")
	require.NotEqual(t, tr, child, "a span of its own")
	require.Equal(t, child, ChildTrace(tr, "agent.request o-1:0 1"), "a re-send carries the same context")
	require.Equal(t, "-01", child[len(child)-3:], "the flags are kept")

	for _, bad := range []string{"", "00-abc", "01-" + TraceID(tr) + "-0123456789abcdef-01",
		"00-00000000000000000000000000000000-0123456789abcdef-01", "00-" + TraceID(tr) + "-0000000000000000-01"} {
		require.False(t, ValidTrace(bad), bad)
		require.Empty(t, ChildTrace(bad, "x"))
		require.Empty(t, TraceID(bad))
	}
	require.Equal(t, tr, OrderTrace("", "junk", tr, child))
}
