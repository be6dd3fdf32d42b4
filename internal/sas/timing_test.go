package sas

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A reply's queuedMs and ranMs: written as integers when measured, left out
// when not; read back the same; anything but a non-negative integer reads
// as absent and never fails the reply. They are outside the signature: a
// reply with them verifies under its request's signature, as one without
// them (an older agent's) does.
func TestReplyTiming(t *testing.T) {
	t.Parallel()
	rep := AgentReply{V: MessageVersion, Kind: KindAgentReply, OrderID: "o-1", Attempt: 1, LockedBy: "s", Outcome: OutcomeDone,
		QueuedMs: MillisOf(1500 * time.Millisecond), RanMs: MillisOf(0)}
	body := Encode(rep)
	require.Contains(t, body, `"queuedMs":1500,"ranMs":0`, "a measured 0 is written")
	var back AgentReply
	require.NoError(t, json.Unmarshal([]byte(body), &back))
	require.Equal(t, rep.Timing(), back.Timing())
	d, ok := back.QueuedMs.Get()
	require.True(t, ok)
	require.Equal(t, 1500*time.Millisecond, d)

	old := Encode(AgentReply{V: MessageVersion, Kind: KindAgentReply, OrderID: "o-1", Attempt: 1, LockedBy: "s", Outcome: OutcomeDone})
	require.NotContains(t, old, "queuedMs")
	require.NotContains(t, old, "ranMs")
	back = AgentReply{}
	require.NoError(t, json.Unmarshal([]byte(old), &back))
	require.False(t, back.Timing().Known(), "absent is unknown, not 0")

	for _, bad := range []string{`-5`, `1.5`, `"12"`, `null`, `true`, `{}`, `9007199254740992`, `1e3`} {
		var r AgentReply
		err := json.Unmarshal([]byte(strings.Replace(body, `"queuedMs":1500`, `"queuedMs":`+bad, 1)), &r)
		require.NoError(t, err, bad)
		require.True(t, r.QueuedMs.IsZero(), bad)
		require.Equal(t, "o-1", r.OrderID, "the rest of the reply is read")
		ran, ok := r.RanMs.Milliseconds()
		require.True(t, ok)
		require.Zero(t, ran)
	}
	require.Equal(t, MillisFrom(0), MillisOf(-time.Second), "clocks apart: 0, not negative")

	signer, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	req := AgentRequest{OrderID: "o-1", Step: 0, StepName: "charge", Agent: "payments", Attempt: 1, LockedBy: "s", Workflow: "payment"}
	sig := signer.Sign(req.Signed())
	for _, r := range []AgentReply{
		{OrderID: "o-1", StepName: "charge", Agent: "payments", Attempt: 1, LockedBy: "s", Workflow: "payment", Sig: sig},
		{OrderID: "o-1", StepName: "charge", Agent: "payments", Attempt: 1, LockedBy: "s", Workflow: "payment", Sig: sig,
			QueuedMs: MillisOf(time.Hour), RanMs: MillisOf(time.Second)},
	} {
		require.NoError(t, signer.Verify(r.Signed(), r.Sig), "with or without the timing")
	}
}
