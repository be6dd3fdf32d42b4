// Package remotesim simulates a remote service (payments, refunds, and any
// other POST /<resource>) for agents to be tested against. It injects the
// ordinary failures of docs/pattern.md §1 — latency, transient errors with
// Retry-After, permanent 4xx, hangs, and responses lost after the work was
// done — and keeps an idempotency ledger, so a test can assert that however
// the calls failed and were retried, every key caused at most one effect.
//
// Protocol (after the IETF Idempotency-Key draft and Stripe):
//
//   - Every business request carries an Idempotency-Key header (bare or as a
//     quoted structured-field string), else 400.
//   - The first call for a key that gets past the injected faults performs the
//     effect and answers 201 with a small JSON object, whatever the size of
//     the request: "id", "<resource singular>Id" (e.g. "paymentId"), "status"
//     (payments: "captured", refunds: "refunded", other resources:
//     "created"), "effectId", "idempotencyKey" and the request's "orderId".
//   - A later call with the same key, path and body bytes gets the stored
//     response again with "Idempotent-Replayed: true" and no new effect.
//   - The same key with another body or path is 422; the same key while its
//     first call is still being processed is 409 with Retry-After.
//   - Transient, permanent and hang faults strike before the effect and leave
//     no trace in the ledger (a declined payment is not stored: retrying a
//     permanent failure with the same key is evaluated afresh, unlike Stripe,
//     so an operator's resubmit with the same key can succeed).
//   - A lost response strikes after the effect: the retry must be a replay.
//   - An undo commutes with what it undoes (distributed sagas): a key ending
//     in ":undo" that takes effect cancels its forward key (the same key
//     without ":undo"). A forward call that reaches its effect after that
//     makes none and gets 409 "cancelled" (no Retry-After), stored like any
//     answer, so a late or duplicate request for a step already undone never
//     leaves an effect behind its undo (docs/protocol.md, "Idempotency keys").
//
// The body hash is over the raw bytes, so a client must resend identical
// bytes (Go's encoding/json is deterministic for the same value).
//
// Randomness comes from one seeded generator, four draws per call in arrival
// order: sequential calls are exactly reproducible; concurrent calls are
// reproducible only in aggregate.
//
// Admin API, never subject to faults, no key needed:
//
//	GET  /_sim/faults   current knobs (JSON shape: see Faults.MarshalJSON)
//	PUT  /_sim/faults   replace the knobs (absent fields become zero)
//	PATCH /_sim/faults  change only the fields present
//	GET  /_sim/stats    counters, total and per path
//	GET  /_sim/ledger   effects, key states, duplicate keys
//	POST /_sim/reset    clear ledger, effects, stats, script progress; reseed
//	GET  /_sim/healthz  200 when serving
//
// The knobs as JSON (every field optional; durations are Go duration
// strings; a zero status, hangFor or lostMode means the default):
//
//	{
//	  "latencyBase": "5ms", "latencyJitter": "20ms",
//	  "slowRate": 0.01, "slowExtra": "2s",
//	  "transientRate": 0.1, "transientStatus": 503, "retryAfter": "1s",
//	  "permanentRate": 0.02, "permanentStatus": 402,
//	  "hangRate": 0.01, "hangFor": "10m",
//	  "lostRate": 0.05, "lostMode": "drop",
//	  "paths": {"/refunds": {"latencyBase": "1ms"}},
//	  "scripts": [
//	    {"key": "order-1:pay", "plan": [{"fault": "transient", "times": 2}]},
//	    {"orderId": "order-7", "path": "/payments", "plan": [{"fault": "permanent"}]},
//	    {"key": "order-9:pay", "plan": [{"fault": "lost", "times": 1, "mode": "error"}]}
//	  ]
//	}
package remotesim

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// Config is what New needs. The zero Config is a valid, fault-free service.
type Config struct {
	// Seed makes every random draw reproducible.
	Seed uint64
	// Faults are the knobs at start; SetFaults changes them later.
	Faults Faults
	// Now stamps effects; nil means time.Now. Sleeps and hangs use real
	// timers: they are what the simulator is for.
	Now func() time.Time
	// MaxBodyBytes bounds a request body; 0 means 1 MiB.
	MaxBodyBytes int64
}

// Sim is the simulated service. It is an http.Handler and safe for
// concurrent use; its knobs can change while it serves.
type Sim struct {
	now      func() time.Time
	maxBody  int64
	seed     uint64
	closed   chan struct{}
	closeOne sync.Once

	mu          sync.Mutex
	rng         *rand.Rand
	faults      Faults
	scriptCalls []int // calls matched so far, per script
	ledger      map[string]*entry
	undone      map[string]string // forward key → the undo key that cancelled it
	epoch       uint64
	effects     []Effect
	seq         uint64 // never reset, so ids stay unique across Reset
	total       Counters
	byPath      map[string]*Counters
	log         callLog      // every call and the fault injected into it (calls.go)
	active      atomic.Int64 // business requests being served (calls.go)
	holds       []*hold      // calls that wait for a release (hold.go)
	held        atomic.Int64 // calls waiting in a hold
	down        int          // outages in force (Down): every call is refused 503
}

// New returns a simulator, or an error when the knobs are out of range.
func New(cfg Config) (*Sim, error) {
	if err := cfg.Faults.Validate(); err != nil {
		return nil, fmt.Errorf("remotesim config: %w", err)
	}
	s := &Sim{
		now:     cfg.Now,
		maxBody: cfg.MaxBodyBytes,
		seed:    cfg.Seed,
		closed:  make(chan struct{}),
		ledger:  make(map[string]*entry),
		undone:  make(map[string]string),
		byPath:  make(map[string]*Counters),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	s.rng = newRand(cfg.Seed)
	s.faults = cfg.Faults.clone()
	s.scriptCalls = make([]int, len(s.faults.Scripts))
	return s, nil
}

func newRand(seed uint64) *rand.Rand {
	// The second PCG word is a fixed odd constant so that seed 0 is as good
	// a seed as any other.
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// Faults returns a copy of the current knobs.
func (s *Sim) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.clone()
}

// SetFaults replaces the knobs. Script progress restarts only if the scripts
// changed, so tuning a rate mid-test does not replay a script from its start.
func (s *Sim) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("setting faults: %w", err)
	}
	f = f.clone()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !reflect.DeepEqual(f.Scripts, s.faults.Scripts) {
		s.scriptCalls = make([]int, len(f.Scripts))
	}
	s.faults = f
	return nil
}

// Reset forgets the ledger, the effects, the counters and script progress,
// and reseeds the generator; the knobs stay. Requests in flight during a
// Reset still answer, but their effects are not recorded.
func (s *Sim) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger = make(map[string]*entry)
	s.undone = make(map[string]string)
	s.epoch++
	s.effects = nil
	s.total = Counters{}
	s.byPath = make(map[string]*Counters)
	s.log = callLog{}
	s.scriptCalls = make([]int, len(s.faults.Scripts))
	s.rng = newRand(s.seed)
}

// Close releases every hanging request (their connections are dropped) and
// cuts latency short. Register it with http.Server.RegisterOnShutdown, since
// Shutdown otherwise waits for hangs that only end with the client.
func (s *Sim) Close() {
	s.closeOne.Do(func() { close(s.closed) })
}
