// Package bank is the example's stand-in for a card processor: charges up
// to a limit, and refunds, each under an idempotency key, with the same
// rules as package inventory: a repeated charge gets the stored answer, and
// a refund that arrives before its charge cancels it.
package bank

import (
	"errors"
	"fmt"
	"sync"
)

var (
	// ErrDeclined: the card was declined. A refusal for good.
	ErrDeclined = errors.New("card declined")
	// ErrCancelled: the charge's key was refunded before the charge
	// arrived. The charge has no effect, for good.
	ErrCancelled = errors.New("refunded before it was charged")
)

// Receipt is a charge made.
type Receipt struct {
	Ref    string `json:"ref"`
	Amount int    `json:"amount"`
}

// Bank charges cards. It is safe for concurrent use.
type Bank struct {
	mu       sync.Mutex
	limit    int
	answers  map[string]answer
	refunded map[string]bool
	balance  int // charged less refunded
}

type answer struct {
	receipt  Receipt
	err      error
	refunded bool
}

// New returns a bank that declines any charge over limit euros.
func New(limit int) *Bank {
	return &Bank{limit: limit, answers: map[string]answer{}, refunded: map[string]bool{}}
}

// Charge charges amount euros under key, or answers why not. The same key
// always gets the same answer.
func (b *Bank) Charge(key string, amount int) (Receipt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, seen := b.answers[key]
	switch {
	case seen:
	case b.refunded[key]:
		a = answer{err: ErrCancelled}
	case amount <= 0 || amount > b.limit:
		a = answer{err: fmt.Errorf("%w: %d EUR (the limit is %d EUR)", ErrDeclined, amount, b.limit)}
	default:
		b.balance += amount
		a = answer{receipt: Receipt{Ref: fmt.Sprintf("ch-%d", len(b.answers)+1), Amount: amount}}
	}
	b.answers[key] = a
	return a.receipt, a.err
}

// Refund gives back what key charged, and cancels a charge of key that has
// not arrived yet. Refunding twice, or a key never charged, is no error.
func (b *Bank) Refund(key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refunded[key] = true
	if a, ok := b.answers[key]; ok && a.err == nil && !a.refunded {
		a.refunded = true
		b.answers[key] = a
		b.balance -= a.receipt.Amount
	}
	return nil
}

// Balance is what was charged less what was refunded, in euros.
func (b *Bank) Balance() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.balance
}
