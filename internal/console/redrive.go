package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// A redrive (docs/console.md, "Redriving a dead-letter queue") shows each
// message before it moves, and moves a message back to the control queue
// only when SQS says a supervisor or a known operator sent it
// (Config.ControlSenders): a dead-letter queue is where a forged retry or
// compensate would wait to be laundered through an operator's credentials
// (docs/trust.md, "Dead letters").

// maxRedrivePeek bounds the messages a dry run shows.
const maxRedrivePeek = 100

// peekVisibility is how long a dry run hides the messages it shows; it
// hands them back at once (visibility 0) when it has read them.
const peekVisibility = 30 * time.Second

// redriveRefusal says why a dead-lettered message must not move back to
// ref, or "" when it may. Only the control queue's messages are checked:
// their sender is their authority (the scheduler records it as the actor),
// and the SenderId SQS stamped on them travels with them into the
// dead-letter queue.
func (s *Server) redriveRefusal(ref QueueRef, m sas.InboundMessage) string {
	if ref.URL != s.cfg.App.ControlQueueURL {
		return ""
	}
	if m.SenderID == "" {
		return "SQS names no sender: only a message a supervisor or an operator sent moves back to the control queue"
	}
	for _, id := range s.cfg.ControlSenders {
		if id != "" && (m.SenderID == id || strings.HasPrefix(m.SenderID, id+":")) {
			return ""
		}
	}
	return fmt.Sprintf("sent by %s, neither the supervisor nor a known operator (SAS_SUPERVISOR_SENDER_ID, SAS_CONTROL_SENDERS): not moved; read it, then delete it yourself", m.SenderID)
}

// redriveAs is the queue a dead letter of ref is redriven as (a
// sas.Redrive through the control queue, so that the scheduler takes it
// for a redelivery: docs/console.md, "Redriving a dead-letter queue"), or
// "" for one that goes back to its own queue (an agent's).
func (s *Server) redriveAs(ref QueueRef) string {
	if s.cfg.App.ControlQueueURL == "" {
		return ""
	}
	switch {
	case ref.URL == s.cfg.App.IntakeQueueURL:
		return sas.RedriveIntake
	case ref.URL == s.cfg.App.ControlQueueURL:
		return sas.RedriveControl
	case ref.Name == "scheduler":
		return sas.RedriveScheduler
	}
	return ""
}

// moveBack is where a redrive sends dead letter m of ref, and what: a
// sas.Redrive carrying it to the control queue for the queues the scheduler
// reads; the message as it is, to its own queue, for an agent's (an agent
// reports a late pick-up whatever its receive count) and for a dead letter
// too large to carry.
func (s *Server) moveBack(ref QueueRef, m sas.InboundMessage) (url, body string) {
	q := s.redriveAs(ref)
	if q == "" {
		return ref.URL, m.Body
	}
	b := sas.Encode(sas.Redrive{V: sas.MessageVersion, Kind: sas.KindRedrive, Queue: q, Body: m.Body,
		MessageID: m.MessageID, Sender: m.SenderID, Actor: s.cfg.App.Actor})
	if len(b) > sas.MaxRedriveBytes {
		return ref.URL, m.Body
	}
	return s.cfg.App.ControlQueueURL, b
}

// describe is what a dry run shows of one message: its kind, order and
// step as the body claims them, its sender, its receives, and its body,
// cut.
func describe(m sas.InboundMessage) Target {
	var head struct {
		Kind    string `json:"kind"`
		OrderID string `json:"orderId"`
		Step    *int   `json:"step"`
	}
	_ = json.Unmarshal([]byte(m.Body), &head) // a malformed body is shown as it is
	t := Target{Order: head.OrderID, Step: -1, Name: head.Kind}
	if head.Kind == "" {
		t.Name = "intake"
	}
	if head.Step != nil {
		t.Step = *head.Step
	}
	sender := m.SenderID
	if sender == "" {
		sender = "unknown"
	}
	body := m.Body
	if len(body) > 1024 {
		body = body[:1024] + fmt.Sprintf("… [%d bytes]", len(m.Body))
	}
	t.Detail = fmt.Sprintf("message %s, sent by %s at %s, received %d times: %s", m.MessageID, sender, clockTime(m.SentAt), m.ReceiveCount, body)
	return t
}

// peek reads up to maxRedrivePeek messages of dlq and hands them back.
func (s *Server) peek(ctx context.Context, dlq string) ([]sas.InboundMessage, error) {
	var out []sas.InboundMessage
	defer func() {
		for _, m := range out {
			_ = s.cfg.Queues.ChangeVisibility(context.WithoutCancel(ctx), sas.ChangeVisibilityParams{QueueURL: dlq, Receipt: m.Receipt, Timeout: 0})
		}
	}()
	for len(out) < maxRedrivePeek {
		msgs, err := s.cfg.Queues.Receive(ctx, sas.ReceiveParams{QueueURL: dlq, Max: 10, Visibility: peekVisibility})
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 {
			break
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// redrive moves a dead-letter queue's messages back to their queue: the
// dry run lists each, the confirmed run moves those the rule allows and
// reports the others as failures, left where they are.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request, name string, confirm bool) {
	var ref *QueueRef
	for i := range s.cfg.QueueRefs {
		if s.cfg.QueueRefs[i].Name == name {
			ref = &s.cfg.QueueRefs[i]
		}
	}
	if ref == nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("no queue %q", name))
		return
	}
	dlq, err := s.cfg.Queues.DeadLetterQueue(r.Context(), ref.URL)
	if err == nil && dlq == "" {
		err = fmt.Errorf("queue %s has no dead-letter queue", name)
	}
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	d, err := s.cfg.Queues.Depth(r.Context(), dlq)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	if !confirm {
		msgs, err := s.peek(r.Context(), dlq)
		if err != nil {
			s.fail(w, http.StatusBadGateway, err)
			return
		}
		var targets []Target
		for _, m := range msgs {
			t := describe(m)
			t.Refuse = s.redriveRefusal(*ref, m)
			targets = append(targets, t)
		}
		back := "move back to " + ref.URL
		if s.redriveAs(*ref) != "" {
			back = "go back to the scheduler through " + s.cfg.App.ControlQueueURL + ", as a redelivery of itself"
		}
		note := fmt.Sprintf("%d message(s) in %s (%d in flight elsewhere), %d shown below; each would %s unless refused",
			d.Visible, dlq, d.InFlight, len(msgs), back)
		s.plan(w, "redrive", Filter{}, url.Values{"queue": {name}}, targets, note)
		return
	}
	ref2 := *ref
	id := s.start("redrive "+name, d.Visible, func(ctx context.Context, done func(string, error)) {
		seen := map[string]bool{}
		for {
			msgs, err := s.cfg.Queues.Receive(ctx, sas.ReceiveParams{QueueURL: dlq, Max: 10, Visibility: time.Minute})
			if err != nil {
				done("receive from "+dlq, err)
				return
			}
			fresh := 0
			for _, m := range msgs {
				if seen[m.MessageID] {
					continue // a refused one, back after its visibility
				}
				seen[m.MessageID] = true
				fresh++
				if why := s.redriveRefusal(ref2, m); why != "" {
					done("message "+m.MessageID, errors.New("refused: "+why))
					continue
				}
				to, body := s.moveBack(ref2, m)
				res, err := s.cfg.Queues.Send(ctx, sas.SendParams{QueueURL: to, Messages: []sas.OutboundMessage{{ID: "m", Body: body}}})
				if err == nil && len(res.Failed) > 0 {
					err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
				}
				if err == nil {
					_, err = s.cfg.Queues.Delete(ctx, sas.DeleteParams{QueueURL: dlq, Receipts: []string{m.Receipt}})
				}
				done("message "+m.MessageID, err)
			}
			if fresh == 0 {
				return
			}
		}
	})
	http.Redirect(w, r, "/jobs/"+id, http.StatusSeeOther)
}
