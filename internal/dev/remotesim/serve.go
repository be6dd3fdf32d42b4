package remotesim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

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
	if s.down > 0 {
		// An outage refuses every call, scripted or not, and consumes no
		// script step: a plan resumes where it was once the service is up.
		d.fault, d.status = FaultTransient, p.TransientStatus
		return d
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
	if !s.waitHeld(r, orderID) {
		return // the client went while the call was held: it never reached the service
	}

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
