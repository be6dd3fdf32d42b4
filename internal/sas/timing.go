package sas

import (
	"strconv"
	"time"
)

// Millis is a duration in whole milliseconds that an agent measured and
// reports for people to read (AgentReply.QueuedMs, RanMs; the console's
// order page). It is never read by a decision and never signed.
//
// Its zero value is unknown (absent from the message: an agent built before
// the field), which is not a measured 0. On the wire it is a non-negative
// integer; anything else (negative, fractional, a string, above
// MaxMillis) reads as unknown, never as an error, so no reply is refused
// or misread for it.
type Millis struct {
	ms    uint64
	known bool
}

// MaxMillis bounds a Millis on the wire: the largest integer a JSON number
// carries exactly (2^53-1 ms, some 285,000 years).
const MaxMillis = 1<<53 - 1

// MillisOf is d in whole milliseconds, known; a negative d (clocks apart)
// is 0.
func MillisOf(d time.Duration) Millis {
	return Millis{ms: uint64(max(d, 0).Milliseconds()), known: true}
}

// Get is the duration and whether it is known.
func (m Millis) Get() (time.Duration, bool) {
	return time.Duration(m.ms) * time.Millisecond, m.known
}

// IsZero reports an unknown duration (omitzero leaves it out).
func (m Millis) IsZero() bool { return !m.known }

// Milliseconds is the value in milliseconds and whether it is known.
func (m Millis) Milliseconds() (uint64, bool) { return m.ms, m.known }

// MillisFrom is n milliseconds, known when n is at most MaxMillis (as a
// store decodes it).
func MillisFrom(n uint64) Millis {
	if n > MaxMillis {
		return Millis{}
	}
	return Millis{ms: n, known: true}
}

func (m Millis) MarshalJSON() ([]byte, error) {
	if !m.known {
		return []byte("null"), nil
	}
	return strconv.AppendUint(nil, m.ms, 10), nil
}

func (m *Millis) UnmarshalJSON(b []byte) error {
	*m = Millis{}
	if n, err := strconv.ParseUint(string(b), 10, 64); err == nil {
		*m = MillisFrom(n)
	}
	return nil // anything else is unknown, not an error
}

// RunTiming is what an agent measured of the run an outcome is about (its
// reply's queuedMs and ranMs). The scheduler records it in the history
// entry of the transition that outcome makes, for people: the console
// shows the queue wait and the execution of each attempt apart. Never read
// by a decision. Zero: not measured (an agent built before the fields, or
// a transition no agent reported).
type RunTiming struct {
	// Queued is from when the request was sent (SQS's SentTimestamp) to
	// the start of its run: the time in the agent queue, a retry interval's
	// delay and earlier deliveries included.
	Queued Millis
	// Ran is the run: the agent's call, its in-process tries included.
	Ran Millis
}

// Known reports whether anything was measured.
func (t RunTiming) Known() bool { return !t.Queued.IsZero() || !t.Ran.IsZero() }

// Timing is the run timing a reply reports.
func (r AgentReply) Timing() RunTiming { return RunTiming{Queued: r.QueuedMs, Ran: r.RanMs} }
