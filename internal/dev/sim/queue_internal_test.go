package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// Two records of one body in a batch (an agent's two replies to a
// duplicated request): the scheduler renews each once, in the batch's
// order. When the first's renewal fails (it is handled as it is) and the
// second's goes out, the copy hands on the second, not the first: the
// first's handler, dying later, did not linger past a hand-off it never
// made (seed 34 of TestARedriveFinishesWhatItsDeadLetterHeld's mix: the
// copy was put on the first, and a message whose every last handler died
// was called a good message let go).
func TestARenewalCopyHandsOnTheRecordItRenews(t *testing.T) {
	t.Parallel()
	body := `{"attempt":1,"kind":"agent.reply","orderId":"o3","outcome":"done","step":0,"v":1}`
	first, second := &receive{receipt: "r-first"}, &receive{receipt: "r-second"}
	tk := &task{received: []received{{&message{id: "m13", body: body}, first}, {&message{id: "m14", body: body}, second}}}
	copyOf := sas.OutboundMessage{ID: "0", Body: `{"attempt":1,"kind":"agent.reply","orderId":"o3","outcome":"done","sasRenewalSig":"x","sasRenewals":1,"step":0,"v":1}`}

	tk.stops = 1
	tk.sendFailed([]sas.OutboundMessage{copyOf}) // the first record's renewal
	tk.stops = 2
	tk.handedOff(copyOf.Body) // the second's
	require.Zero(t, first.handedOffAt, "the first record's renewal failed: it was handed on by nobody")
	require.Equal(t, 2, second.handedOffAt)
	require.True(t, tk.handOffFailed)
}
