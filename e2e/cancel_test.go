//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/sas"
)

// cancelInFlight is issue 28's black-box check of cancellation on the
// deployed stack: a trip to the example's slow hotel (booking.SlowHotel,
// which takes 8 s to confirm) is cancelled by its submitter, through the
// intake queue, while its hotel step runs. The cancel lets the hotel
// settle (its hold is made, the step completes with no successor), then
// releases the room and the flight, newest first; the car and the payment
// never start; the order ends Cancelled and its submitter hears
// "cancelled", never "processed", "failed" or "compensated" (which page an
// operator). docs/protocol.md, "Cancellation".
func cancelInFlight(t *testing.T, ctx context.Context, e approvalEnv) {
	t.Helper()
	id := "travel-" + e.run + "-cancelled"
	body := fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"trip","payload":{"traveller":"Ada","flight":"LH 123","hotel":"slow","car":"compact","amount":420},"replyTo":%q}`, id, e.replyTo)
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.intake), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("cancel: sending the trip: %v", err)
	}
	read := func() sas.OrderView {
		v, err := e.store.GetOrder(ctx, id)
		if err != nil {
			return sas.OrderView{}
		}
		return v
	}
	// The hotel step in flight: claimed, its agent holding the slow room.
	until(t, id+"'s hotel step in flight", func() bool {
		v := read()
		return len(v.Steps) == 4 && v.Steps[1].ProcessState == sas.Processing
	})
	sentAt := time.Now()
	cancel := fmt.Sprintf(`{"v":1,"kind":"cancel","orderId":%q,"reason":"the traveller changed their mind"}`, id)
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.intake), MessageBody: aws.String(cancel)}); err != nil {
		t.Fatalf("cancel: sending the cancel: %v", err)
	}
	// Done when its submitter hears "cancelled", which the scheduler posts
	// once nothing is left to undo. The store's view alone reads Cancelled
	// for the moment between the hotel's completion and its undo's claim,
	// two writes (cancelledDone, then the compensation's first claim).
	heard := func() bool {
		for _, st := range e.read()[id] {
			if st.Status == sas.StatusCancelled {
				return true
			}
		}
		return false
	}
	until(t, id+" cancelled, its effects undone and its submitter told", func() bool {
		v := read()
		return heard() && v.State() == sas.Cancelled && v.Settled()
	})
	v := read()
	for i, want := range []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending, sas.Pending} {
		r := v.Steps[i]
		if r.ProcessState != want {
			t.Errorf("cancel: %s step %s is %s, want %s (%q)", id, r.StepName, r.ProcessState, want, r.LastError)
		}
		if want == sas.Pending && r.Attempt != 0 {
			t.Errorf("cancel: %s step %s was started (attempt %d) after its order was cancelled", id, r.StepName, r.Attempt)
		}
	}
	// The hotel settled before anything was undone: its hold completed
	// (Processing → Processed), then the room, then the flight, were
	// released, one undo after the other.
	at := func(r sas.StepRecord, from, to sas.ProcessState) time.Time {
		for _, h := range r.History {
			if h.To == to && (from == "" || h.From == from) {
				return h.At
			}
		}
		return time.Time{}
	}
	flight, hotel := v.Steps[0], v.Steps[1]
	hotelDone := at(hotel, sas.Processing, sas.Processed)
	if hotelDone.IsZero() {
		t.Errorf("cancel: %s's hotel never completed: a step in flight is let to settle, history %+v", id, hotel.History)
	}
	undoStarts := map[string]time.Time{"hotel": at(hotel, "", sas.Compensating), "flight": at(flight, "", sas.Compensating)}
	undone := map[string]time.Time{"hotel": at(hotel, "", sas.Compensated), "flight": at(flight, "", sas.Compensated)}
	for name, start := range undoStarts {
		if start.Before(hotelDone) {
			t.Errorf("cancel: %s's %s undo started at %s, before the hotel in flight settled at %s", id, name,
				start.Format(time.StampMilli), hotelDone.Format(time.StampMilli))
		}
	}
	if undoStarts["flight"].Before(undone["hotel"]) {
		t.Errorf("cancel: %s's flight undo started at %s, before the hotel's was done at %s: newest first, one at a time",
			id, undoStarts["flight"].Format(time.StampMilli), undone["hotel"].Format(time.StampMilli))
	}
	// What the submitter heard: "cancelled" last, and nothing that pages.
	// ("cancelled" was heard above.)
	var sts []sas.Status
	for _, st := range e.read()[id] {
		sts = append(sts, st)
	}
	sort.Slice(sts, func(i, j int) bool { return sts[i].Sequence < sts[j].Sequence })
	if last := sts[len(sts)-1]; last.Status != sas.StatusCancelled {
		t.Errorf("cancel: %s's last status is %q, want %q", id, last.Status, sas.StatusCancelled)
	}
	for _, st := range sts {
		switch st.Status {
		case sas.StatusProcessed, sas.StatusFailed, sas.StatusCompensated:
			t.Errorf("cancel: %s's submitter heard %q (seq %d): a cancelled order pages nobody and is never processed", id, st.Status, st.Sequence)
		}
	}
	t.Logf("cancel: %s cancelled during its hotel step (in flight), which settled %s after the cancel was sent; room and flight released; %d statuses, the last %q",
		id, hotelDone.Sub(sentAt).Round(100*time.Millisecond), len(sts), sts[len(sts)-1].Status)
}
