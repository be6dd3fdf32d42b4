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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
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

// ServeHTTP routes /_sim/ to the admin API and everything else to the
// simulated resources.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_sim" || strings.HasPrefix(r.URL.Path, "/_sim/") {
		s.serveAdmin(w, r)
		return
	}
	s.serveResource(w, r)
}

// decision is everything drawn for one call, before it touches the ledger.
type decision struct {
	profile  Profile // with defaults
	fault    FaultKind
	status   int // for transient and permanent
	lost     bool
	lostMode string
	latency  time.Duration
}

// decide draws the fate of one call. Callers hold mu. It always draws the
// same four numbers, whatever they are used for, so one call's fate never
// shifts the draws of the calls after it.
func (s *Sim) decide(key, orderID, path string) decision {
	uJitter, uSlow, uFault, uLost := s.rng.Float64(), s.rng.Float64(), s.rng.Float64(), s.rng.Float64()

	p := s.faults.profileFor(path).withDefaults()
	d := decision{profile: p, fault: FaultNone, lostMode: p.LostMode}
	d.latency = p.LatencyBase + time.Duration(uJitter*float64(p.LatencyJitter))
	if uSlow < p.SlowRate {
		d.latency += p.SlowExtra
	}

	for i, sc := range s.faults.Scripts {
		if !sc.matches(key, orderID, path) {
			continue
		}
		st, ok := sc.step(s.scriptCalls[i])
		s.scriptCalls[i]++
		if !ok {
			return d // plan used up: clean
		}
		switch st.Fault {
		case FaultTransient:
			d.fault, d.status = FaultTransient, p.TransientStatus
		case FaultPermanent:
			d.fault, d.status = FaultPermanent, p.PermanentStatus
		case FaultHang:
			d.fault = FaultHang
		case FaultLost:
			d.lost = true
			if st.Mode != "" {
				d.lostMode = st.Mode
			}
		}
		if st.Status != 0 {
			d.status = st.Status
		}
		return d
	}

	switch {
	case uFault < p.TransientRate:
		d.fault, d.status = FaultTransient, p.TransientStatus
	case uFault < p.TransientRate+p.HangRate:
		d.fault = FaultHang
	case uFault < p.TransientRate+p.HangRate+p.PermanentRate:
		d.fault, d.status = FaultPermanent, p.PermanentStatus
	}
	d.lost = uLost < p.LostRate
	return d
}

var pathRE = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`)

func (s *Sim) serveResource(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	path := r.URL.Path
	bad := func(status int, typ, msg string) {
		s.mu.Lock()
		s.count(path, func(c *Counters) { c.Calls++; c.BadRequests++ })
		s.mu.Unlock()
		writeError(w, status, typ, msg)
	}
	if !pathRE.MatchString(path) {
		// Not counted per path: the path itself is what is wrong.
		s.mu.Lock()
		s.total.Calls++
		s.total.BadRequests++
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "no such resource: POST /<resource> (letters, digits, ._~-)")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		bad(http.StatusMethodNotAllowed, "method_not_allowed", "resources accept POST only")
		return
	}
	key, err := idempotencyKey(r.Header)
	if err != nil {
		bad(http.StatusBadRequest, "idempotency_key_required", err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			bad(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", tooBig.Limit))
			return
		}
		bad(http.StatusBadRequest, "bad_body", fmt.Sprintf("reading body: %v", err))
		return
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		bad(http.StatusBadRequest, "bad_body", "the body must be a JSON object")
		return
	}
	orderID, _ := fields["orderId"].(string)

	s.mu.Lock()
	s.count(path, func(c *Counters) { c.Calls++ })
	d := s.decide(key, orderID, path)
	at := s.now()
	s.mu.Unlock()
	note := func(outcome string) { s.record(callOf(d, key, orderID, path, at, outcome)) }

	// Infrastructure faults come first: an overloaded or stuck front end
	// fails a request whether or not its key was seen before.
	switch d.fault {
	case FaultTransient:
		note("")
		s.bump(path, func(c *Counters) { c.Transient++ })
		s.writeTransient(w, d.status, d.profile.RetryAfter, "simulated transient failure")
		return
	case FaultHang:
		note("")
		s.bump(path, func(c *Counters) { c.Hangs++ })
		s.hang(r, d.profile.HangFor)
		return
	}

	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])

	s.mu.Lock()
	if e, ok := s.ledger[key]; ok {
		switch {
		case e.path != path || e.bodyHash != hash:
			s.count(path, func(c *Counters) { c.Conflicts++ })
			s.noteCall(callOf(d, key, orderID, path, at, "conflict"))
			s.mu.Unlock()
			writeError(w, http.StatusUnprocessableEntity, "idempotency_key_reused",
				fmt.Sprintf("Idempotency-Key %q was first used with another request (%s, body sha256 %.12s…)", key, e.path, e.bodyHash))
			return
		case e.state == stateInFlight:
			s.count(path, func(c *Counters) { c.Busy++ })
			s.noteCall(callOf(d, key, orderID, path, at, "busy"))
			s.mu.Unlock()
			w.Header().Set("Retry-After", retryAfterSeconds(d.profile.RetryAfter))
			writeError(w, http.StatusConflict, "idempotency_key_in_use",
				fmt.Sprintf("a request with Idempotency-Key %q is still being processed", key))
			return
		}
		resp := storedResponse{status: e.status, body: e.body}
		s.count(path, func(c *Counters) { c.Replays++ })
		s.noteCall(callOf(d, key, orderID, path, at, "replay"))
		s.mu.Unlock()
		s.sleep(d.latency)
		s.respond(w, r, path, d, resp, true)
		return
	}
	e := &entry{key: key, path: path, bodyHash: hash, state: stateInFlight, epoch: s.epoch}
	s.ledger[key] = e
	s.mu.Unlock()

	// Processing time, spent holding the key. It ignores the client's
	// context on purpose: the service finishes work its caller gave up on.
	s.sleep(d.latency)

	if d.fault == FaultPermanent {
		s.mu.Lock()
		if s.ledger[key] == e {
			delete(s.ledger, key)
		}
		s.count(path, func(c *Counters) { c.Permanent++ })
		s.noteCall(callOf(d, key, orderID, path, at, "declined"))
		s.mu.Unlock()
		writePermanent(w, d.status, path)
		return
	}

	resp, cancelled := s.effect(e, r.Method, path, orderID, body, fields)
	if cancelled {
		note("cancelled")
	} else {
		note("effect")
	}
	s.respond(w, r, path, d, resp, false)
}

// UndoSuffix ends the key of an undo: the key it cancels is the rest.
const UndoSuffix = ":undo"

// effect performs the call's effect and stores its response in the entry; or,
// for a forward key an undo has cancelled, stores the refusal (cancelled).
func (s *Sim) effect(e *entry, method, path, orderID string, body []byte, fields map[string]any) (resp storedResponse, cancelled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if undoKey, ok := s.undone[e.key]; ok && s.ledger[e.key] == e && e.epoch == s.epoch {
		var eb errorBody
		eb.Error.Type, eb.Error.Status = "cancelled", http.StatusConflict
		eb.Error.Message = fmt.Sprintf("Idempotency-Key %q was undone (by %q) before this request could take effect", e.key, undoKey)
		b, err := marshal(eb)
		if err != nil {
			panic(fmt.Sprintf("remotesim: encoding response: %v", err))
		}
		e.state, e.status, e.body = stateDone, http.StatusConflict, b
		s.count(path, func(c *Counters) { c.Cancelled++ })
		return storedResponse{status: e.status, body: b}, true
	}
	s.seq++
	resource := path[strings.LastIndexByte(path, '/')+1:]
	singular := strings.TrimSuffix(resource, "s")
	effectID := fmt.Sprintf("eff_%06d", s.seq)
	resourceID := fmt.Sprintf("%s_%06d", idPrefix(resource, singular), s.seq)

	// What a payments API answers: the resource's id, its status, the key
	// and the order it is for; not the request echoed back, which made a
	// large request a larger answer (issue 8: a 50 KiB payload of '<' came
	// back as 307 KiB, over the agent's limit, for a charge that happened).
	out := map[string]any{
		"id":             resourceID,
		singular + "Id":  resourceID,
		"status":         statusFor(resource),
		"effectId":       effectID,
		"idempotencyKey": e.key,
	}
	if orderID != "" {
		out["orderId"] = orderID
	}
	respBody, err := marshal(out)
	if err != nil {
		// Strings always encode.
		panic(fmt.Sprintf("remotesim: encoding response: %v", err))
	}
	resp = storedResponse{status: http.StatusCreated, body: respBody}

	if s.ledger[e.key] != e || e.epoch != s.epoch {
		return resp, false // reset while in flight: answer, record nothing
	}
	if fwd, ok := strings.CutSuffix(e.key, UndoSuffix); ok {
		s.undone[fwd] = e.key
	}
	e.state, e.status, e.body, e.effectID = stateDone, resp.status, resp.body, effectID
	s.effects = append(s.effects, Effect{
		ID: effectID, Key: e.key, Method: method, Path: path, Resource: resource,
		ResourceID: resourceID, OrderID: orderID, BodyHash: e.bodyHash,
		Body: json.RawMessage(append([]byte(nil), body...)), At: s.now(),
	})
	s.count(path, func(c *Counters) { c.Effects++ })
	return resp, false
}

// respond sends a success, or loses it as the decision says.
func (s *Sim) respond(w http.ResponseWriter, r *http.Request, path string, d decision, resp storedResponse, replayed bool) {
	if d.lost {
		s.bump(path, func(c *Counters) { c.Lost++ })
		switch d.lostMode {
		case LostError:
			s.writeTransient(w, http.StatusServiceUnavailable, d.profile.RetryAfter, "simulated failure after the effect")
		case LostHang:
			s.hang(r, d.profile.HangFor)
		default:
			// The documented way to end a response without one: the server
			// closes the connection and logs nothing.
			panic(http.ErrAbortHandler)
		}
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body) // the client may have gone; nothing to do about it
}

// hang blocks until the client goes, HangFor passes, or Close. Unless the
// client went, the connection is then dropped without a response.
func (s *Sim) hang(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return
	case <-s.closed:
	case <-t.C:
	}
	panic(http.ErrAbortHandler)
}

func (s *Sim) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.closed:
	}
}

func (s *Sim) bump(path string, f func(*Counters)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count(path, f)
}

func (s *Sim) writeTransient(w http.ResponseWriter, status int, retryAfter time.Duration, msg string) {
	w.Header().Set("Retry-After", retryAfterSeconds(retryAfter))
	typ := "unavailable"
	if status == http.StatusTooManyRequests {
		typ = "rate_limited"
	}
	writeError(w, status, typ, msg)
}

func writePermanent(w http.ResponseWriter, status int, path string) {
	typ := "invalid_request"
	switch status {
	case http.StatusPaymentRequired:
		typ = "payment_declined"
	case http.StatusUnprocessableEntity:
		typ = "unprocessable"
	case http.StatusForbidden:
		typ = "forbidden"
	case http.StatusNotFound, http.StatusGone:
		typ = "not_found"
	}
	writeError(w, status, typ, fmt.Sprintf("simulated permanent failure of %s", path))
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Status  int    `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	var b errorBody
	b.Error.Type, b.Error.Status, b.Error.Message = typ, status, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// marshal is json.Marshal without HTML escaping, as services that are not
// web pages answer: '<' stays one byte.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// retryAfterSeconds renders Retry-After in whole seconds, rounded up so a
// client that honours it never comes back early.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

const maxKeyLen = 255

// idempotencyKey reads the header, bare (Stripe) or as a quoted
// structured-field string (the IETF draft).
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", errors.New("an Idempotency-Key header is required")
	}
	if len(vals) > 1 {
		return "", errors.New("exactly one Idempotency-Key header, please")
	}
	k := strings.TrimSpace(vals[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > maxKeyLen {
		return "", fmt.Errorf("the Idempotency-Key must be 1 to %d characters", maxKeyLen)
	}
	for _, c := range []byte(k) {
		if c < 0x21 || c > 0x7e {
			return "", errors.New("the Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return k, nil
}

func idPrefix(resource, singular string) string {
	switch resource {
	case "payments":
		return "pay"
	case "refunds":
		return "re"
	}
	return singular
}

func statusFor(resource string) string {
	switch resource {
	case "payments":
		return "captured"
	case "refunds":
		return "refunded"
	}
	return "created"
}
