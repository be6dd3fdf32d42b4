// Package inventory is the example's stand-in for a supplier's booking API
// (an airline's seats, a hotel's rooms, a rental firm's cars): an
// in-memory stock that takes holds, each under the idempotency key of the
// step that asks for it.
//
// It behaves as the services a SAS agent calls must behave
// (docs/protocol.md, "Idempotency keys"):
//
//   - Hold is idempotent under its key: a repeated call (a retry, a
//     redelivery, a second attempt) gets the stored answer, a hold or a
//     refusal, and takes nothing more from the stock.
//   - Release commutes with Hold: a release that arrives before its hold
//     (a late delivery of the step after its undo) cancels the key, and the
//     hold arriving after it takes nothing and answers ErrCancelled.
//   - Release is idempotent too.
package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

var (
	// ErrSoldOut: nothing of the item is left. A refusal for good.
	ErrSoldOut = errors.New("sold out")
	// ErrCancelled: the key was released before its hold arrived. The hold
	// has no effect, for good.
	ErrCancelled = errors.New("cancelled before it was held")
	// ErrUnavailable: the service did not answer; the call may or may not
	// have taken effect. Trying again (with the same key) is safe.
	ErrUnavailable = errors.New("service unavailable")
)

// Hold is one item held for one key.
type Hold struct {
	Ref  string `json:"ref"` // the supplier's reference, "<supplier>-<n>"
	Item string `json:"item"`
}

// Inventory is a supplier's stock. It is safe for concurrent use.
type Inventory struct {
	mu        sync.Mutex
	supplier  string
	stock     map[string]int
	def       int // the stock of an item not in stock
	answers   map[string]answer
	released  map[string]bool
	held      int                      // holds in force
	dropped   int                      // answers still to lose (DropAnswers)
	slow      map[string]time.Duration // how long an item's hold takes (SetSlow)
	cancelled []string                 // references given back by Cancel
}

// answer is the stored outcome of a key's hold.
type answer struct {
	hold     Hold
	err      error
	released bool
}

// New returns the stock of a supplier: so many of each item in stock, and
// def of any other item.
func New(supplier string, stock map[string]int, def int) *Inventory {
	s := make(map[string]int, len(stock))
	for k, v := range stock {
		s[k] = v
	}
	return &Inventory{supplier: supplier, stock: s, def: def, answers: map[string]answer{}, released: map[string]bool{}}
}

// Hold holds one of item under key, or answers why not: ErrSoldOut,
// ErrCancelled, or ErrUnavailable when the answer was lost (DropAnswers).
// The same key always gets the same answer.
func (i *Inventory) Hold(key, item string) (Hold, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	a, seen := i.answers[key]
	switch {
	case seen:
	case i.released[key]:
		a = answer{err: ErrCancelled}
		i.answers[key] = a
	case i.left(item) <= 0:
		a = answer{err: ErrSoldOut}
		i.answers[key] = a
	default:
		i.stock[item] = i.left(item) - 1
		i.held++
		a = answer{hold: Hold{Ref: fmt.Sprintf("%s-%d", i.supplier, len(i.answers)+1), Item: item}}
		i.answers[key] = a
	}
	if i.dropped > 0 {
		i.dropped--
		return Hold{}, ErrUnavailable
	}
	return a.hold, a.err
}

// Release gives back what key holds, and cancels a hold of key that has
// not arrived yet. Releasing twice, or a key that never held, is no error.
func (i *Inventory) Release(key string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.released[key] = true
	if a, ok := i.answers[key]; ok && a.err == nil && !a.released {
		a.released = true
		i.answers[key] = a
		i.stock[a.hold.Item] = i.left(a.hold.Item) + 1
		i.held--
	}
	return nil
}

// ErrUnknownRef: no hold has that reference. A refusal for good.
var ErrUnknownRef = errors.New("no hold has that reference")

// Cancel gives back the hold whose reference is ref (the booking id Hold
// answered), as a supplier's "cancel booking" does. Cancelling twice is no
// error; a reference never answered is ErrUnknownRef. Unlike Release it
// needs the booking id: an undo reads it from its step's result.
func (i *Inventory) Cancel(ref string) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	for key, a := range i.answers {
		if a.err != nil || a.hold.Ref != ref {
			continue
		}
		i.released[key] = true
		if !a.released {
			a.released = true
			i.answers[key] = a
			i.stock[a.hold.Item] = i.left(a.hold.Item) + 1
			i.held--
			i.cancelled = append(i.cancelled, ref)
		}
		return nil
	}
	return fmt.Errorf("cancelling %s: %w", ref, ErrUnknownRef)
}

// Cancelled are the references Cancel gave back, in order.
func (i *Inventory) Cancelled() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return append([]string(nil), i.cancelled...)
}

// DropAnswers makes the next n holds take effect as usual but lose their
// answer: the caller gets ErrUnavailable, as when a connection drops after
// the request arrived.
func (i *Inventory) DropAnswers(n int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.dropped = n
}

// SetSlow makes every hold of item take d before it answers (HoldCtx): a
// supplier that is slow to confirm, so that a step holding it is in flight
// long enough to be watched, or cancelled, while it runs.
func (i *Inventory) SetSlow(item string, d time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.slow == nil {
		i.slow = map[string]time.Duration{}
	}
	i.slow[item] = d
}

// HoldCtx is Hold after the item's slowness (SetSlow), or ctx's error if
// ctx ends first, with nothing held.
func (i *Inventory) HoldCtx(ctx context.Context, key, item string) (Hold, error) {
	i.mu.Lock()
	d := i.slow[item]
	i.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return Hold{}, ctx.Err()
		case <-t.C:
		}
	}
	return i.Hold(key, item)
}

// Left is how many of item are left.
func (i *Inventory) Left(item string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.left(item)
}

// Held is how many holds are in force.
func (i *Inventory) Held() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.held
}

func (i *Inventory) left(item string) int {
	if n, ok := i.stock[item]; ok {
		return n
	}
	return i.def
}
