package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Faults is a run's fault mix: how likely each kind of fault is at the stop
// (or the event) where it can happen. DefaultFaults is the mix every seed
// drew from before swarm testing; Swarm draws a seed's own.
type Faults struct {
	// Death: a task's instance dies before the call it is about to make
	// (any stop).
	Death float64
	// Ambiguous: a store write commits, its response is lost, and the
	// retry fails against it.
	Ambiguous float64
	// Send: a queue send fails. Alert: an alert fails.
	Send, Alert float64
	// Transient, Refusal, Lost: the remote's answers to a step (an undo
	// is refused a tenth as often): a transient error with no effect, a
	// refusal, the effect made and the answer lost.
	Transient, Refusal, Lost float64
	// Store: a store call fails with a transient error (throttled, the
	// service unavailable), having done nothing.
	Store float64
	// Duplicate and Jump weigh, against the other events, SQS delivering
	// a message in flight a second time and the clock jumping (30 s to
	// 10 min: past the functions' timeouts and the queues' visibility).
	// Outage weighs a store outage of 1 to 15 minutes starting, during
	// which every store call fails as Store's do.
	Duplicate, Jump, Outage float64
	// Unhandled: a receive never reaches a handler (the event source
	// received the batch and the invocation was throttled, or its
	// instance was gone), but counts against the queue's maxReceiveCount
	// all the same (issue 31: a quarter of a local run's receives). Off in
	// the default mix and in swarm testing (its rate is 0); sassim
	// -faults unhandled=0.3 turns it on.
	Unhandled float64
}

// DefaultFaults is the mix of a run without swarm testing (sassim
// -swarm=false), and the rates Swarm scales.
var DefaultFaults = Faults{
	Death: 0.015, Ambiguous: 0.06, Send: 0.04, Alert: 0.15,
	Transient: 0.15, Refusal: 0.05, Lost: 0.05, Store: 0.01,
	Duplicate: 0.4, Jump: 0.08, Outage: 0.01,
}

// faultKinds names the fields of Faults, for the options and the trace.
var faultKinds = []string{"death", "ambiguous", "send", "alert", "transient", "refusal", "lost", "store", "duplicate", "jump", "outage", "unhandled"}

// weights are the kinds that weigh an event against the others rather than
// give a probability.
var weights = []string{"duplicate", "jump", "outage"}

func (f *Faults) field(kind string) *float64 {
	switch kind {
	case "death":
		return &f.Death
	case "ambiguous":
		return &f.Ambiguous
	case "send":
		return &f.Send
	case "alert":
		return &f.Alert
	case "transient":
		return &f.Transient
	case "refusal":
		return &f.Refusal
	case "lost":
		return &f.Lost
	case "store":
		return &f.Store
	case "duplicate":
		return &f.Duplicate
	case "outage":
		return &f.Outage
	case "jump":
		return &f.Jump
	case "unhandled":
		return &f.Unhandled
	}
	return nil
}

// swarmScales are what Swarm multiplies a kind's default rate by, drawn
// alike: a quarter of the kinds are off in a seed, and the rest run at half
// to four times their default.
var swarmScales = []float64{0, 0.5, 1, 2, 4}

// Swarm draws a seed's fault mix (swarm testing: Groce et al., "Swarm
// Testing", ISSTA 2012). Each kind is off, or its default rate scaled, so
// that one seed is dominated by deaths, another by duplicates and jumps,
// another by a remote that refuses: a mix that makes a rare class likely
// in some seeds instead of equally unlikely in all. A probability is
// capped at one half, so that every task still gets somewhere.
func Swarm(seed int64) Faults {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5a4d))
	f := DefaultFaults
	for _, k := range faultKinds {
		p := f.field(k)
		*p = min(*p*swarmScales[r.IntN(len(swarmScales))], 0.5)
	}
	return f
}

// String lists the mix as ParseFaults reads it.
func (f Faults) String() string {
	parts := make([]string, 0, len(faultKinds))
	for _, k := range faultKinds {
		parts = append(parts, k+"="+strconv.FormatFloat(*f.field(k), 'g', 4, 64))
	}
	return strings.Join(parts, ",")
}

// ParseFaults sets the kinds a list such as "death=0.05,jump=0" names on
// f; a kind not named keeps its rate. A probability must be within 0..1
// (a weight, duplicate or jump, only not negative).
func ParseFaults(f Faults, list string) (Faults, error) {
	for _, kv := range strings.Split(list, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		p := f.field(strings.TrimSpace(k))
		if !ok || p == nil {
			return f, fmt.Errorf("fault %q: want KIND=RATE, KIND one of %s", kv, strings.Join(faultKinds, ", "))
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		weight := slices.Contains(weights, strings.TrimSpace(k))
		if err != nil || x < 0 || (!weight && x > 1) {
			return f, fmt.Errorf("fault %q: the rate must be a number from 0 to 1 (a weight for %s: 0 or more)", kv, strings.Join(weights, ", "))
		}
		*p = x
	}
	return f, nil
}

// faultAt draws the fault a stopped task gets at its stop.
func (w *World) faultAt(t *task) choice {
	f := w.cfg.Faults
	p := w.rng.Float64()
	if p < f.Death {
		w.tracef("task %d (%s) dies before %s", t.id, t.name, t.at.desc)
		return choice{crash: true}
	}
	p = w.rng.Float64()
	var c choice
	switch t.at.kind {
	case opRead, opWrite:
		if w.clock.Now().Before(w.storeDownUntil) || w.rng.Float64() < f.Store {
			// What the task owes is excused: the call fails, and its
			// message comes back (as for a send that fails).
			c.fault, t.excused = faultUnavailable, true
		} else if t.at.kind == opWrite && p < f.Ambiguous {
			c.fault = faultAmbiguous
		}
	case opSend:
		if p < f.Send {
			c.fault = faultFail
		}
	case opAlert:
		if p < f.Alert {
			c.fault = faultFail
		}
	case opRemote:
		undo := strings.Contains(t.at.desc, " undo ")
		refusal := f.Refusal
		if undo {
			refusal /= 10
		}
		switch {
		case p < f.Transient:
			c.fault = faultTransient
		case p < f.Transient+refusal:
			c.fault = faultPermanent
		case p < f.Transient+refusal+f.Lost:
			c.fault = faultLost
		}
	}
	if c.fault != faultNone {
		w.tracef("task %d (%s) at %s: %s", t.id, t.name, t.at.desc, faultNames[c.fault])
	}
	return c
}

var faultNames = map[fault]string{
	faultAmbiguous: "ambiguous commit", faultFail: "fails", faultTransient: "transient error",
	faultPermanent: "refused", faultLost: "effect made, answer lost", faultUnavailable: "the store is unavailable",
}

// outage starts a store outage (Faults.Outage).
func (w *World) outage() {
	d := time.Duration(1+w.rng.IntN(15)) * time.Minute
	w.storeDownUntil = w.clock.Now().Add(d)
	w.tracef("the store is down for %s", d)
}
