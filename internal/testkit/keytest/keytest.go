// Package keytest is a signing key's secret as Secrets Manager stages it
// (AWSCURRENT, AWSPENDING, AWSPREVIOUS), for the tests of key rotation:
// its Read is the sas.KeySource fromaws.SigningKeys makes of a real one.
package keytest

import (
	"context"
	"sync"

	"github.com/sas-go/sas/internal/sas"
)

// Secret is the key's versions by stage; nil is a stage no version has.
// Fail, when set, is the error every Read returns.
type Secret struct {
	mu                         sync.Mutex
	current, pending, previous []byte
	fail                       error
	reads                      int
}

// New is a secret whose current version is key, never rotated.
func New(key []byte) *Secret { return &Secret{current: key} }

// Read returns the current key and the pending and previous ones that
// exist, as the scheduler reads them.
func (s *Secret) Read(context.Context) (sas.KeyRing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.fail != nil {
		return sas.KeyRing{}, s.fail
	}
	r := sas.KeyRing{Current: s.current}
	for _, k := range [][]byte{s.pending, s.previous} {
		if k != nil {
			r.Accepted = append(r.Accepted, k)
		}
	}
	return r, nil
}

// Reads is how many times Read was called.
func (s *Secret) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// PutPending puts key as the pending version (docs/trust.md, rotation
// step 1).
func (s *Secret) PutPending(key []byte) { s.set(func() { s.pending = key }) }

// Promote makes the pending version current; the current one becomes the
// previous (step 2).
func (s *Secret) Promote() {
	s.set(func() { s.current, s.previous, s.pending = s.pending, s.current, nil })
}

// Rotate is PutPending and Promote at once: what a leaked key calls for.
func (s *Secret) Rotate(key []byte) {
	s.set(func() { s.current, s.previous, s.pending = key, s.current, nil })
}

// RemovePrevious takes the previous version's stage away: the old key
// revoked (step 3).
func (s *Secret) RemovePrevious() { s.set(func() { s.previous = nil }) }

// FailReads makes every Read fail with err (nil: answer again).
func (s *Secret) FailReads(err error) { s.set(func() { s.fail = err }) }

func (s *Secret) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}
