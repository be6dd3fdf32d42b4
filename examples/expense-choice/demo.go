package expense

import (
	"context"
	"fmt"
	"sync"
)

// Demo is an in-memory expense system, bank and mail: it remembers each
// key's effect, so a repeated call does nothing twice. The manager
// approves expenses up to Limit cents.
type Demo struct {
	Limit int

	mu        sync.Mutex
	Filed     map[string]Claim // expense id → claim
	Paid      map[string]int   // expense id → cents
	Told      map[string]string
	Decisions int
}

// NewDemo returns an empty demo whose manager approves up to limit cents.
func NewDemo(limit int) *Demo {
	return &Demo{Limit: limit, Filed: map[string]Claim{}, Paid: map[string]int{}, Told: map[string]string{}}
}

func (d *Demo) File(_ context.Context, key string, c Claim) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := "E-" + key
	d.Filed[id] = c
	return id, nil
}

func (d *Demo) Withdraw(_ context.Context, expenseID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.Filed, expenseID)
	return nil
}

func (d *Demo) Decide(_ context.Context, _ string, c Claim) (Approval, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Decisions++
	return Approval{Approved: c.Amount <= d.Limit, By: "manager"}, nil
}

func (d *Demo) Pay(_ context.Context, _ string, expenseID string, c Claim) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.Filed[expenseID]; !ok {
		return fmt.Errorf("no expense %s", expenseID)
	}
	d.Paid[expenseID] = c.Amount
	return nil
}

func (d *Demo) Tell(_ context.Context, key, employee, why string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Told[key] = employee + ": " + why
	return nil
}
