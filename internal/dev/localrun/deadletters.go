package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// DeadLetterQueue is what one dead-letter queue held at the end of a run.
type DeadLetterQueue struct {
	Queue    string   // the queue whose DLQ it is
	Count    int      // every message it held, counted one by one
	Messages []string // what each is (kind, order, step, attempt, receives), the first maxListed
}

// maxListed bounds the messages a summary names per queue.
const maxListed = 20

// countDeadLetters receives every message of each DLQ (hiding each for the
// rest of the run, so none is received twice) until the queue's own depth
// says none is left, and names each. A DLQ that cannot be read is an error:
// a run whose dead letters are unknown cannot pass.
func countDeadLetters(ctx context.Context, q interface {
	sas.Queue
	sas.DepthReader
}, dlqs map[string]string) ([]DeadLetterQueue, error) {
	names := make([]string, 0, len(dlqs))
	for n := range dlqs {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []DeadLetterQueue
	for _, name := range names {
		url := dlqs[name]
		d, err := q.Depth(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("reading the depth of the %s DLQ: %w", name, err)
		}
		want := d.Total()
		dq := DeadLetterQueue{Queue: name}
		seen := map[string]bool{}
		// Each receive returns at most 10; a few empty receives in a row
		// (an emulator may return none while some are visible) end it.
		for empty := 0; len(seen) < want && empty < 5; {
			msgs, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Hour})
			if err != nil {
				return nil, fmt.Errorf("receiving from the %s DLQ: %w", name, err)
			}
			if len(msgs) == 0 {
				empty++
				continue
			}
			empty = 0
			for _, m := range msgs {
				if seen[m.MessageID] {
					continue
				}
				seen[m.MessageID] = true
				if len(dq.Messages) < maxListed {
					dq.Messages = append(dq.Messages, describeDeadLetter(m))
				}
			}
		}
		dq.Count = max(len(seen), want)
		if dq.Count > 0 {
			out = append(out, dq)
		}
	}
	return out, nil
}

// describeDeadLetter names a dead-lettered message by what it is about.
func describeDeadLetter(m sas.InboundMessage) string {
	var b struct {
		Kind         string `json:"kind"`
		OrderID      string `json:"orderId"`
		Step         *int   `json:"step"`
		Attempt      int    `json:"attempt"`
		Compensation bool   `json:"compensation"`
		Renewals     int    `json:"sasRenewals"` // the scheduler's renewals of it (docs/protocol.md, "Dead letters")
	}
	if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
		return fmt.Sprintf("%s: not JSON (%d bytes), received %d times", m.MessageID, len(m.Body), m.ReceiveCount)
	}
	kind := b.Kind
	if kind == "" {
		kind = "intake"
	}
	s := fmt.Sprintf("%s: %s order %s", m.MessageID, kind, b.OrderID)
	if b.Step != nil {
		s += fmt.Sprintf(" step %d attempt %d", *b.Step, b.Attempt)
	}
	if b.Compensation {
		s += " (undo)"
	}
	if b.Renewals > 0 {
		s += fmt.Sprintf(", renewed %d times", b.Renewals)
	}
	return s + fmt.Sprintf(", received %d times", m.ReceiveCount)
}
