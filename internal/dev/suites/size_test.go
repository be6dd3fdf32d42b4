package suites_test

// Orders at the size limits on the emulators (issue 8, holes 1 and 2): a
// payload that grew sixfold when HTML-escaped once made an agent request
// over the SQS limit (the order ended CompensationFailed) and a simulator
// answer over the agent's response limit (a charge reported failed).

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/sas"
)

func TestSizeLimitsOnTheEmulators(t *testing.T) {
	t.Parallel()
	sys := itStart(t, localrun.Options{StepTimeout: itStepTimeout, SupervisorEvery: itSweepEvery, Shards: itShards}, true)
	ctx := itCtx(t, 90*time.Second)

	// The order of the issue: 50 KiB of '<' (307,498 bytes once escaped).
	lt := `{"note":"` + strings.Repeat("<", 50<<10) + `"}`
	// The worst intake accepts: exactly sas.MaxPayloadBytes of escapes JSON
	// keeps at six bytes, on the three-step workflow (three requests, three
	// replies, an echo of the payload in each).
	head, tail := `{"note":"`, `"}`
	n := (sas.MaxPayloadBytes - len(head) - len(tail)) / len(`\u0001`)
	ctl := head + strings.Repeat(`\u0001`, n) + strings.Repeat(" ", sas.MaxPayloadBytes-len(head)-len(tail)-6*n) + tail
	require.Len(t, ctl, sas.MaxPayloadBytes)

	sys.watch(t, "sz-lt", "sz-ctl")
	require.NoError(t, sys.Submit(ctx,
		sas.Intake{OrderID: "sz-lt", Workflow: "payment", Payload: json.RawMessage(lt), ReplyTo: sys.StatusQueueURL},
		sas.Intake{OrderID: "sz-ctl", Workflow: "order", Payload: json.RawMessage(ctl), ReplyTo: sys.StatusQueueURL},
	))

	v := sys.requireFinal(ctx, t, "sz-lt", sas.Processed)
	require.Equal(t, 1, v.Steps[0].Attempt, "dispatched and answered on the first attempt")
	require.Len(t, sys.effectsOf("sz-lt"), 1, "exactly one charge")
	itRequireStatus(ctx, t, sys, "sz-lt", true, "received", "step-done:charge", "processed")

	sys.requireFinal(ctx, t, "sz-ctl", sas.Processed, sas.Processed, sas.Processed)
	require.Len(t, sys.effectsOf("sz-ctl"), 3, "one effect per step")
	itRequireStatus(ctx, t, sys, "sz-ctl", true,
		"received", "step-done:reserve", "step-done:charge", "step-done:ship", "processed")

	// The service got the payload as sent: '<' is one byte in the body.
	for _, e := range sys.Sim.Effects() {
		if e.OrderID == "sz-lt" {
			require.Less(t, len(e.Body), 51<<10+100, "request body of %d bytes", len(e.Body))
		}
	}
}
