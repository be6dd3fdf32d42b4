package remotesim

import (
	"encoding/json"
	"sort"
	"time"
)

// Effect is one thing the simulated service did: a payment captured, a refund
// made. A correct service records at most one per idempotency key.
type Effect struct {
	ID         string          `json:"effectId"`
	Key        string          `json:"key"`
	Method     string          `json:"method"`
	Path       string          `json:"path"`
	Resource   string          `json:"resource"`
	ResourceID string          `json:"resourceId"`
	OrderID    string          `json:"orderId,omitempty"`
	BodyHash   string          `json:"bodyHash"`
	Body       json.RawMessage `json:"body"`
	At         time.Time       `json:"at"`
}

// Counters count calls by outcome. Calls counts every business request
// (admin requests are not counted); each call lands in at most one of the
// other counters, except Lost, which is counted alongside Effects or Replays.
type Counters struct {
	Calls       int64 `json:"calls"`
	BadRequests int64 `json:"badRequests"` // 400/405/413: no key, bad body, wrong method
	Transient   int64 `json:"transient"`
	Permanent   int64 `json:"permanent"`
	Hangs       int64 `json:"hangs"`
	Conflicts   int64 `json:"conflicts"` // 422: key reused with another body or path
	Busy        int64 `json:"busy"`      // 409: key in use by a request in flight
	Effects     int64 `json:"effects"`
	Replays     int64 `json:"replays"`
	Cancelled   int64 `json:"cancelled"` // 409: the key's undo took effect first
	Lost        int64 `json:"lost"`      // responses lost after the effect (or after a replay)
}

// Stats are the counters in total and per request path.
type Stats struct {
	Counters
	Paths map[string]Counters `json:"paths"`
}

type entryState int

const (
	stateInFlight entryState = iota
	stateDone
)

func (s entryState) String() string {
	if s == stateDone {
		return "done"
	}
	return "inFlight"
}

// entry is the ledger's record of one idempotency key.
type entry struct {
	key      string
	path     string
	bodyHash string
	state    entryState
	epoch    uint64 // the ledger generation that created it; Reset bumps it
	status   int
	body     []byte
	effectID string
}

// storedResponse is what a replay sends back.
type storedResponse struct {
	status int
	body   []byte
}

// KeyState is the ledger's view of one key, for /_sim/ledger.
type KeyState struct {
	Key      string `json:"key"`
	Path     string `json:"path"`
	BodyHash string `json:"bodyHash"`
	State    string `json:"state"`
	Status   int    `json:"status,omitempty"`
	EffectID string `json:"effectId,omitempty"`
}

// Ledger is a snapshot of the idempotency ledger.
type Ledger struct {
	Effects    []Effect   `json:"effects"`
	Keys       []KeyState `json:"keys"`
	Duplicates []string   `json:"duplicates"`
}

// Effects returns every effect so far, oldest first.
func (s *Sim) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.effects...)
}

// EffectCount is how many effects the key caused. Anything but 0 or 1 is a
// bug in the simulator, which is what Duplicates is for.
func (s *Sim) EffectCount(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.effects {
		if e.Key == key {
			n++
		}
	}
	return n
}

// Duplicates lists the keys with more than one effect, sorted. It counts the
// effect log itself rather than trusting the ledger map, so a test asserting
// it is empty checks the de-duplication instead of restating it.
func (s *Sim) Duplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.duplicatesLocked()
}

func (s *Sim) duplicatesLocked() []string {
	seen := make(map[string]int, len(s.effects))
	for _, e := range s.effects {
		seen[e.Key]++
	}
	dups := []string{}
	for k, n := range seen {
		if n > 1 {
			dups = append(dups, k)
		}
	}
	sort.Strings(dups)
	return dups
}

// Ledger returns a snapshot of effects and key states, keys sorted.
func (s *Sim) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Ledger{
		Effects:    append([]Effect{}, s.effects...),
		Keys:       make([]KeyState, 0, len(s.ledger)),
		Duplicates: s.duplicatesLocked(),
	}
	for _, e := range s.ledger {
		l.Keys = append(l.Keys, KeyState{
			Key: e.key, Path: e.path, BodyHash: e.bodyHash, State: e.state.String(),
			Status: e.status, EffectID: e.effectID,
		})
	}
	sort.Slice(l.Keys, func(i, j int) bool { return l.Keys[i].Key < l.Keys[j].Key })
	return l
}

// Stats returns a copy of the counters.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Counters: s.total, Paths: make(map[string]Counters, len(s.byPath))}
	for p, c := range s.byPath {
		st.Paths[p] = *c
	}
	return st
}

// count applies f to the total and to the path's counters. Callers hold mu.
func (s *Sim) count(path string, f func(*Counters)) {
	f(&s.total)
	c, ok := s.byPath[path]
	if !ok {
		// Bound the map: a client probing random paths must not grow it
		// without limit; the overflow is still in the total.
		if len(s.byPath) >= maxTrackedPaths {
			return
		}
		c = &Counters{}
		s.byPath[path] = c
	}
	f(c)
}

const maxTrackedPaths = 256
