package greet

import (
	"context"
	"sync"
)

// Demo is an in-memory shop and mail service, for the tutorial's agents
// and tests: it remembers each key's effect, so a repeated call does
// nothing twice.
type Demo struct {
	mu       sync.Mutex
	Reserved map[string]string // key → gift
	Sent     map[string]string // key → addressee
}

// NewDemo returns an empty demo service.
func NewDemo() *Demo { return &Demo{Reserved: map[string]string{}, Sent: map[string]string{}} }

func (d *Demo) Reserve(_ context.Context, key, gift string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Reserved[key] = gift
	return "reserved " + gift, nil
}

func (d *Demo) Release(_ context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.Reserved, key)
	return nil
}

func (d *Demo) Send(_ context.Context, key, to string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Sent[key] = to
	return nil
}
