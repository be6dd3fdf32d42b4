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

// The X-Ray trace header of a traceparent (SQS's AWSTraceHeader): the trace
// id split as X-Ray writes it, the span as the parent, the sampled flag
// kept; and back again. A trace that is not valid has none, and a header
// without a valid Root and Parent has no traceparent.
func TestXRayTraceHeader(t *testing.T) {
	t.Parallel()
	const w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := XRayTraceHeader(w3c)
	require.Equal(t, "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1", h)
	require.Equal(t, w3c, TraceFromXRayHeader(h), "round trip")

	unsampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	require.Equal(t, "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=0", XRayTraceHeader(unsampled))
	require.Equal(t, unsampled, TraceFromXRayHeader(XRayTraceHeader(unsampled)))

	for _, tr := range []string{NewTrace("o-1", time.Now()), ChildTrace(NewTrace("o-2", time.Now()), "agent.reply o-2:0 1")} {
		require.Equal(t, tr, TraceFromXRayHeader(XRayTraceHeader(tr)), tr)
		require.Equal(t, TraceID(tr)[:8], XRayTraceHeader(tr)[7:15], "X-Ray's epoch part is the trace id's first 8 digits")
	}

	// Fields in another order, and one X-Ray adds, are read.
	require.Equal(t, w3c, TraceFromXRayHeader("Sampled=1;Parent=00f067aa0ba902b7;Lineage=a87bd80c:1|68fd508a:5;Root=1-4bf92f35-77b34da6a3ce929d0e0e4736"))

	for _, bad := range []string{"", "junk", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		require.Empty(t, XRayTraceHeader(bad), bad)
	}
	for _, bad := range []string{"", "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736", // no parent: a root segment, no span to join
		"Root=2-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1",
		"Root=1-4bf92f3577b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7",
		"Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa;Sampled=1",
		"Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=yes",
		"Root=1-00000000-000000000000000000000000;Parent=00f067aa0ba902b7;Sampled=1"} {
		require.Empty(t, TraceFromXRayHeader(bad), bad)
	}
}
