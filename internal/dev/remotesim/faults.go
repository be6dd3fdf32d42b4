package remotesim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// FaultKind names one injected fault, as used in scripts.
type FaultKind string

const (
	// FaultNone lets the call through untouched (a script step that passes).
	FaultNone FaultKind = "none"
	// FaultTransient answers 503 or 429 with Retry-After, before any effect.
	FaultTransient FaultKind = "transient"
	// FaultPermanent answers a 4xx with a JSON error body, before any effect.
	FaultPermanent FaultKind = "permanent"
	// FaultHang blocks the request, before any effect, until the client goes
	// away, HangFor passes, or the simulator is closed.
	FaultHang FaultKind = "hang"
	// FaultLost performs the effect and then loses the response (LostMode).
	FaultLost FaultKind = "lost"
)

// How a lost response is lost. The effect has happened in every mode.
const (
	// LostDrop closes the connection without a response.
	LostDrop = "drop"
	// LostError answers 503 with Retry-After, as a gateway that timed out
	// waiting for a backend that nevertheless finished would.
	LostError = "error"
	// LostHang blocks like FaultHang, so the client's deadline passes.
	LostHang = "hang"
)

// Defaults applied where a Profile leaves a knob at zero.
const (
	DefaultTransientStatus = 503
	DefaultPermanentStatus = 402
	DefaultHangFor         = 10 * time.Minute
	DefaultLostMode        = LostDrop
)

// Profile is the set of rate and latency knobs for a path (or for every path
// without its own profile). The zero Profile is a perfect, instant service.
//
// Latency is LatencyBase plus a uniform draw from [0, LatencyJitter), plus
// SlowExtra on a SlowRate fraction of calls (the p99 tail). It is the service's
// processing time: it is spent while the idempotency key is held, and it runs
// to the end even when the client has gone, so a deadline shorter than the
// latency yields an effect whose response nobody reads — as in real services.
//
// TransientRate, HangRate and PermanentRate are fractions of calls drawn from
// one uniform number, so they are exclusive and their sum must not exceed 1.
// LostRate is drawn separately and applies to calls that would otherwise
// succeed (a first effect or a replay).
type Profile struct {
	LatencyBase   time.Duration
	LatencyJitter time.Duration
	SlowRate      float64
	SlowExtra     time.Duration

	TransientRate float64
	// TransientStatus is 503 (default), 429, 500, 502 or 504.
	TransientStatus int
	// RetryAfter is sent, rounded up to whole seconds, with every transient
	// answer (and with 409 "key in use"). Zero sends "Retry-After: 0".
	RetryAfter time.Duration

	PermanentRate float64
	// PermanentStatus is a 4xx that means "do not retry": 402 (default,
	// payment declined), 400, 403, 404, 410 or 422.
	PermanentStatus int

	HangRate float64
	// HangFor bounds a hang (default 10m); after it the connection is dropped.
	HangFor time.Duration

	LostRate float64
	// LostMode is LostDrop (default), LostError or LostHang.
	LostMode string
}

// Script makes faults deterministic for the calls it matches: a call matches
// when every non-empty selector equals the call's (Key is the Idempotency-Key,
// OrderID the body's "orderId", Path the request path). The first matching
// script wins. Its Plan is consumed one step per matching call; after the plan
// the calls pass clean. Calls a script matches are exempt from the random
// rates (latency still applies), so tests need not zero the rates.
type Script struct {
	Key     string       `json:"key,omitempty"`
	OrderID string       `json:"orderId,omitempty"`
	Path    string       `json:"path,omitempty"`
	Plan    []ScriptStep `json:"plan"`
}

// ScriptStep is one stage of a plan.
type ScriptStep struct {
	Fault FaultKind `json:"fault"`
	// Times is how many calls this step covers; 0 means every remaining call.
	Times int `json:"times,omitempty"`
	// Status overrides the profile's status for transient/permanent steps.
	Status int `json:"status,omitempty"`
	// Mode overrides the profile's LostMode for a lost step.
	Mode string `json:"mode,omitempty"`
}

// Faults is everything injectable: the default profile, per-path profiles
// (a path's profile replaces the default entirely, it is not merged), and
// scripts.
type Faults struct {
	Profile
	Paths   map[string]Profile
	Scripts []Script
}

var (
	transientStatuses = map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true}
	permanentStatuses = map[int]bool{400: true, 402: true, 403: true, 404: true, 410: true, 422: true}
	lostModes         = map[string]bool{LostDrop: true, LostError: true, LostHang: true}
)

// Validate reports the first knob out of range.
func (f Faults) Validate() error {
	if err := f.Profile.validate(); err != nil {
		return err
	}
	for path, p := range f.Paths {
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("paths[%q]: a path starts with /", path)
		}
		if err := p.validate(); err != nil {
			return fmt.Errorf("paths[%q]: %w", path, err)
		}
	}
	for i, s := range f.Scripts {
		if err := s.validate(); err != nil {
			return fmt.Errorf("scripts[%d]: %w", i, err)
		}
	}
	return nil
}

func (p Profile) validate() error {
	for name, r := range map[string]float64{
		"slowRate": p.SlowRate, "transientRate": p.TransientRate, "permanentRate": p.PermanentRate,
		"hangRate": p.HangRate, "lostRate": p.LostRate,
	} {
		if math.IsNaN(r) || r < 0 || r > 1 {
			return fmt.Errorf("%s %v: a rate is in [0, 1]", name, r)
		}
	}
	// A small tolerance so 0.1+0.2+0.7 is accepted despite float rounding.
	if sum := p.TransientRate + p.HangRate + p.PermanentRate; sum > 1+1e-9 {
		return fmt.Errorf("transientRate+hangRate+permanentRate = %v: they share one draw and must sum to at most 1", sum)
	}
	for name, d := range map[string]time.Duration{
		"latencyBase": p.LatencyBase, "latencyJitter": p.LatencyJitter, "slowExtra": p.SlowExtra,
		"retryAfter": p.RetryAfter, "hangFor": p.HangFor,
	} {
		if d < 0 {
			return fmt.Errorf("%s %v: a duration is not negative", name, d)
		}
	}
	if p.TransientStatus != 0 && !transientStatuses[p.TransientStatus] {
		return fmt.Errorf("transientStatus %d: want one of 429, 500, 502, 503, 504", p.TransientStatus)
	}
	if p.PermanentStatus != 0 && !permanentStatuses[p.PermanentStatus] {
		return fmt.Errorf("permanentStatus %d: want one of 400, 402, 403, 404, 410, 422", p.PermanentStatus)
	}
	if p.LostMode != "" && !lostModes[p.LostMode] {
		return fmt.Errorf("lostMode %q: want drop, error or hang", p.LostMode)
	}
	return nil
}

func (s Script) validate() error {
	if s.Key == "" && s.OrderID == "" && s.Path == "" {
		return errors.New("a script needs at least one of key, orderId, path")
	}
	if len(s.Plan) == 0 {
		return errors.New("a script needs a plan")
	}
	for i, st := range s.Plan {
		switch st.Fault {
		case FaultNone, FaultHang:
		case FaultTransient:
			if st.Status != 0 && !transientStatuses[st.Status] {
				return fmt.Errorf("plan[%d]: transient status %d: want one of 429, 500, 502, 503, 504", i, st.Status)
			}
		case FaultPermanent:
			if st.Status != 0 && !permanentStatuses[st.Status] {
				return fmt.Errorf("plan[%d]: permanent status %d: want one of 400, 402, 403, 404, 410, 422", i, st.Status)
			}
		case FaultLost:
			if st.Mode != "" && !lostModes[st.Mode] {
				return fmt.Errorf("plan[%d]: lost mode %q: want drop, error or hang", i, st.Mode)
			}
		default:
			return fmt.Errorf("plan[%d]: fault %q: want none, transient, permanent, hang or lost", i, st.Fault)
		}
		if st.Times < 0 {
			return fmt.Errorf("plan[%d]: times %d is negative", i, st.Times)
		}
		// A forever step must be last: anything after it could never run,
		// which is surely a mistake in the test that wrote it.
		if st.Times == 0 && i != len(s.Plan)-1 {
			return fmt.Errorf("plan[%d]: times 0 (forever) must be the last step", i)
		}
	}
	return nil
}

// withDefaults fills the zero knobs that have a non-zero default.
func (p Profile) withDefaults() Profile {
	if p.TransientStatus == 0 {
		p.TransientStatus = DefaultTransientStatus
	}
	if p.PermanentStatus == 0 {
		p.PermanentStatus = DefaultPermanentStatus
	}
	if p.HangFor == 0 {
		p.HangFor = DefaultHangFor
	}
	if p.LostMode == "" {
		p.LostMode = DefaultLostMode
	}
	return p
}

// step returns the plan step for the n-th (0-based) matching call, or false
// once the plan is used up.
func (s Script) step(n int) (ScriptStep, bool) {
	for _, st := range s.Plan {
		if st.Times == 0 || n < st.Times {
			return st, true
		}
		n -= st.Times
	}
	return ScriptStep{}, false
}

func (s Script) matches(key, orderID, path string) bool {
	return (s.Key == "" || s.Key == key) &&
		(s.OrderID == "" || s.OrderID == orderID) &&
		(s.Path == "" || s.Path == path)
}

func (f Faults) profileFor(path string) Profile {
	if p, ok := f.Paths[path]; ok {
		return p
	}
	return f.Profile
}

// clone copies the maps and slices so callers and the simulator never share
// mutable state.
func (f Faults) clone() Faults {
	out := f
	if f.Paths != nil {
		out.Paths = make(map[string]Profile, len(f.Paths))
		for k, v := range f.Paths {
			out.Paths[k] = v
		}
	}
	if f.Scripts != nil {
		out.Scripts = make([]Script, len(f.Scripts))
		for i, s := range f.Scripts {
			s.Plan = append([]ScriptStep(nil), s.Plan...)
			out.Scripts[i] = s
		}
	}
	return out
}

// The JSON form. Durations are Go duration strings ("250ms", "10m") because a
// bare number would be ambiguous between seconds, milliseconds and Go's
// nanoseconds; numbers are rejected rather than guessed.

type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"250ms\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = jsonDuration(v)
	return nil
}

type profileJSON struct {
	LatencyBase     jsonDuration `json:"latencyBase"`
	LatencyJitter   jsonDuration `json:"latencyJitter"`
	SlowRate        float64      `json:"slowRate"`
	SlowExtra       jsonDuration `json:"slowExtra"`
	TransientRate   float64      `json:"transientRate"`
	TransientStatus int          `json:"transientStatus"`
	RetryAfter      jsonDuration `json:"retryAfter"`
	PermanentRate   float64      `json:"permanentRate"`
	PermanentStatus int          `json:"permanentStatus"`
	HangRate        float64      `json:"hangRate"`
	HangFor         jsonDuration `json:"hangFor"`
	LostRate        float64      `json:"lostRate"`
	LostMode        string       `json:"lostMode"`
}

type faultsJSON struct {
	profileJSON
	Paths   map[string]profileJSON `json:"paths,omitempty"`
	Scripts []Script               `json:"scripts,omitempty"`
}

func (p Profile) toJSON() profileJSON {
	return profileJSON{
		LatencyBase: jsonDuration(p.LatencyBase), LatencyJitter: jsonDuration(p.LatencyJitter),
		SlowRate: p.SlowRate, SlowExtra: jsonDuration(p.SlowExtra),
		TransientRate: p.TransientRate, TransientStatus: p.TransientStatus, RetryAfter: jsonDuration(p.RetryAfter),
		PermanentRate: p.PermanentRate, PermanentStatus: p.PermanentStatus,
		HangRate: p.HangRate, HangFor: jsonDuration(p.HangFor),
		LostRate: p.LostRate, LostMode: p.LostMode,
	}
}

func (j profileJSON) profile() Profile {
	return Profile{
		LatencyBase: time.Duration(j.LatencyBase), LatencyJitter: time.Duration(j.LatencyJitter),
		SlowRate: j.SlowRate, SlowExtra: time.Duration(j.SlowExtra),
		TransientRate: j.TransientRate, TransientStatus: j.TransientStatus, RetryAfter: time.Duration(j.RetryAfter),
		PermanentRate: j.PermanentRate, PermanentStatus: j.PermanentStatus,
		HangRate: j.HangRate, HangFor: time.Duration(j.HangFor),
		LostRate: j.LostRate, LostMode: j.LostMode,
	}
}

// MarshalJSON writes every knob, so a GET shows the whole picture.
func (f Faults) MarshalJSON() ([]byte, error) {
	out := faultsJSON{profileJSON: f.Profile.toJSON(), Scripts: f.Scripts}
	if len(f.Paths) > 0 {
		out.Paths = make(map[string]profileJSON, len(f.Paths))
		for k, v := range f.Paths {
			out.Paths[k] = v.toJSON()
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes onto the receiver's current values, so decoding into
// a zero Faults replaces everything while decoding into a copy of the current
// faults merges (only the fields present change; a "paths" entry or the
// "scripts" list, when present, is replaced as a whole). Unknown fields are an
// error: a misspelt knob silently doing nothing would waste an afternoon.
func (f *Faults) UnmarshalJSON(b []byte) error {
	cur := faultsJSON{profileJSON: f.Profile.toJSON(), Scripts: f.Scripts}
	if f.Paths != nil {
		cur.Paths = make(map[string]profileJSON, len(f.Paths))
		for k, v := range f.Paths {
			cur.Paths[k] = v.toJSON()
		}
	}
	// Scripts, when present, replace the list; without this reset the decoder
	// would overwrite elements in place and keep stale tails.
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("decoding faults: %w", err)
	}
	if _, ok := probe["scripts"]; ok {
		cur.Scripts = nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cur); err != nil {
		return fmt.Errorf("decoding faults: %w", err)
	}
	out := Faults{Profile: cur.profileJSON.profile(), Scripts: cur.Scripts}
	if cur.Paths != nil {
		out.Paths = make(map[string]Profile, len(cur.Paths))
		for k, v := range cur.Paths {
			out.Paths[k] = v.profile()
		}
	}
	*f = out
	return nil
}
