package remotesim

import (
	"sort"
	"sync"
	"time"
)

// Call is the simulator's record of one business request and what it did to
// it: the fault it injected, if any, or the effect or replay it served. A
// harness judges the run with it: an order that failed is explained only by
// faults injected into its own keys (internal/dev/judge).
type Call struct {
	Key     string    `json:"key"`
	OrderID string    `json:"orderId,omitempty"`
	Path    string    `json:"path"`
	At      time.Time `json:"at"` // when the call arrived
	// Fault is what was injected: "" (none), transient, permanent, hang or
	// lost. A lost response is also an Effect or a Replay: the work was done.
	Fault FaultKind `json:"fault,omitempty"`
	// LostMode is how a lost response was lost (drop, error, hang).
	LostMode string `json:"lostMode,omitempty"`
	// Outcome of a call that got past the infrastructure faults: effect,
	// replay, busy (409: the key in flight), conflict (422) or declined
	// (the permanent refusal).
	Outcome string `json:"outcome,omitempty"`
}

// Injected reports whether the simulator injected a fault into the call.
func (c Call) Injected() bool { return c.Fault != "" && c.Fault != FaultNone }

// maxCalls bounds the call log; a soak of 10,000 orders makes well under a
// million calls. Past it the oldest half is dropped (and counted), so the
// simulator never grows without bound in a long-running process.
const maxCalls = 2_000_000

type callLog struct {
	calls   []Call
	dropped int
}

// noteCall appends to the call log. Callers hold mu.
func (s *Sim) noteCall(c Call) {
	if len(s.log.calls) >= maxCalls {
		half := len(s.log.calls) / 2
		s.log.dropped += half
		s.log.calls = append(s.log.calls[:0], s.log.calls[half:]...)
	}
	s.log.calls = append(s.log.calls, c)
}

// record notes one call under the lock.
func (s *Sim) record(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteCall(c)
}

// Calls returns the call log, oldest first, and how many of the oldest calls
// were dropped to bound it (0 unless a run made millions of calls).
func (s *Sim) Calls() (calls []Call, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.log.calls...), s.log.dropped
}

// CallsByKey groups the call log by idempotency key, each oldest first.
func (s *Sim) CallsByKey() map[string][]Call {
	calls, _ := s.Calls()
	out := map[string][]Call{}
	for _, c := range calls {
		out[c.Key] = append(out[c.Key], c)
	}
	for _, cs := range out {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].At.Before(cs[j].At) })
	}
	return out
}

// SlowDown multiplies the latency knobs (base, jitter, slow extra) of the
// default profile and of every path profile by factor, at once, for the
// calls that arrive from now on; SlowDown(1/factor) undoes it. It is the
// runtime knob an overload benchmark turns to slow the remote service.
func (s *Sim) SlowDown(factor float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scale := func(p *Profile) {
		p.LatencyBase = time.Duration(float64(p.LatencyBase) * factor)
		p.LatencyJitter = time.Duration(float64(p.LatencyJitter) * factor)
		p.SlowExtra = time.Duration(float64(p.SlowExtra) * factor)
	}
	scale(&s.faults.Profile)
	for k, p := range s.faults.Paths {
		scale(&p)
		s.faults.Paths[k] = p
	}
}

// Down takes the whole service down from now until up is called: every
// business call is answered as a transient fault (503, or the profile's
// TransientStatus, with its Retry-After), scripted calls included, and is
// logged as one, so a harness explains what failed meanwhile. It is the
// runtime knob for a remote outage in the middle of a run. Outages nest:
// the service is up again when every Down's up has been called; calling
// one up twice does nothing more.
func (s *Sim) Down() (up func()) {
	s.mu.Lock()
	s.down++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.down--
			s.mu.Unlock()
		})
	}
}

// IsDown reports whether an outage (Down) is in force.
func (s *Sim) IsDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down > 0
}

// callOf is the log record of a call decided as d.
func callOf(d decision, key, orderID, path string, at time.Time, outcome string) Call {
	c := Call{Key: key, OrderID: orderID, Path: path, At: at, Outcome: outcome}
	switch {
	case d.fault == FaultTransient || d.fault == FaultHang:
		c.Fault = d.fault
	case outcome == "declined":
		c.Fault = FaultPermanent
	case d.lost && (outcome == "effect" || outcome == "replay"):
		c.Fault, c.LostMode = FaultLost, d.lostMode
	}
	return c
}

// Active is how many business requests the simulator is serving right now
// (hangs included): the calls in flight at the remote service.
func (s *Sim) Active() int { return int(s.active.Load()) }
