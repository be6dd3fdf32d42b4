package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/sas-go/sas/internal/sas"
)

// An outbox holds the messages the records of one invocation send, so that
// Handler.Handle sends them together after the last record: one
// SendMessageBatch per queue for up to ten messages, where sending each as
// it is made costs one SendMessage per message (SQS bills a batch of ten
// small messages as one request).
//
// Messages go out in waves, one Send per queue per wave. A message's wave is
// after its record's previous message, and not before the previous message
// to the same queue: so each record's messages still leave in the order it
// made them, each queue gets its messages in the order they were made, and
// a failure stops that record's later messages exactly as an immediate send
// failing would have. A record whose message failed is reported for
// redelivery (or dropped, as its sender decides); its duplicate branch
// repeats the side effects. On the hot path (one message per record, all to
// the same queue) there is one wave: one request per ten records.
type outbox struct {
	mu         sync.Mutex
	msgs       []queued       // in the order they were made
	recordWave map[int]int    // record → wave of its last message
	queueWave  map[string]int // queue URL → wave of its last message
}

type queued struct {
	record, wave int
	url, body    string
	// onErr turns a send failure into what the sender would have returned
	// had the send failed at once: nil to carry on (a status the caller's
	// queue refuses), else the record's error.
	onErr func(error) error
}

type outboxKey struct{}

type outboxRef struct {
	box    *outbox
	record int
}

// into returns a context whose sends go to the outbox, for record i.
func (b *outbox) into(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, outboxKey{}, outboxRef{box: b, record: i})
}

func (b *outbox) add(record int, url, body string, onErr func(error) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.recordWave == nil {
		b.recordWave, b.queueWave = map[int]int{}, map[string]int{}
	}
	wave := b.queueWave[url]
	if w, ok := b.recordWave[record]; ok {
		wave = max(wave, w+1)
	}
	b.recordWave[record], b.queueWave[url] = wave, wave
	b.msgs = append(b.msgs, queued{record: record, wave: wave, url: url, body: body, onErr: onErr})
}

// sendOrQueue sends one message, or queues it when ctx carries an outbox.
// onErr says what a failure means to the sender (see queued.onErr).
func (s *Service) sendOrQueue(ctx context.Context, url, body string, onErr func(error) error) error {
	if ref, ok := ctx.Value(outboxKey{}).(outboxRef); ok {
		ref.box.add(ref.record, url, body, onErr)
		return nil
	}
	if err := s.send(ctx, url, body); err != nil {
		return onErr(err)
	}
	return nil
}

// recordError is a record's failure found while flushing the outbox.
type recordError struct {
	record int
	err    error
}

// flush sends everything queued, wave by wave, one Send per queue per wave.
// It returns the errors of the records whose messages failed.
func (s *Service) flush(ctx context.Context, b *outbox) []recordError {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []recordError
	stopped := map[int]bool{}
	for wave := 0; ; wave++ {
		byURL := map[string][]queued{}
		var urls []string
		for _, m := range b.msgs {
			if m.wave != wave || stopped[m.record] {
				continue
			}
			if _, ok := byURL[m.url]; !ok {
				urls = append(urls, m.url)
			}
			byURL[m.url] = append(byURL[m.url], m)
		}
		if len(urls) == 0 {
			if slices.ContainsFunc(b.msgs, func(m queued) bool { return m.wave > wave }) {
				continue // only stopped records had messages in this wave
			}
			return errs
		}
		for _, url := range urls {
			entries := byURL[url]
			msgs := make([]sas.OutboundMessage, len(entries))
			for j, e := range entries {
				msgs[j] = sas.OutboundMessage{ID: strconv.Itoa(j), Body: e.body}
			}
			failed := map[int]error{}
			res, err := s.cfg.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: msgs})
			if err != nil {
				for j := range entries {
					failed[j] = err
				}
			}
			for _, f := range res.Failed {
				if j, convErr := strconv.Atoi(f.ID); convErr == nil && j >= 0 && j < len(entries) {
					failed[j] = sendFailure(url, f)
				}
			}
			for j, e := range entries {
				ferr, ok := failed[j]
				if !ok {
					continue
				}
				if rerr := e.onErr(ferr); rerr != nil {
					stopped[e.record] = true
					errs = append(errs, recordError{record: e.record, err: rerr})
				}
			}
		}
	}
}

// sendFailure is the error of one message SQS did not take. A sender fault
// (the same message can never be sent) wraps sas.ErrInvalid, so that callers
// do not have it redelivered for nothing.
func sendFailure(url string, f sas.SendFailure) error {
	err := fmt.Errorf("sending to %s: %s: %s", url, f.Code, f.Message)
	if f.SenderFault {
		return fmt.Errorf("%w: %w", sas.ErrInvalid, err)
	}
	return err
}
