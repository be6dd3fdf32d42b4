package sas

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MinSigningKeyBytes is the shortest key a Signer takes: HMAC-SHA256's
// block of security, 256 bits.
const MinSigningKeyBytes = 32

// Signature layouts. "v2.<key id>.<mac>" names the key that signed, so
// that a scheduler holding the current key and the previous ones checks a
// reply against the right one; "v1.<mac>", written by builds before key
// ids, is checked against each key the scheduler holds. A signature
// without either prefix is not one a build wrote.
const (
	sigPrefix   = "v2."
	sigPrefixV1 = "v1."
)

// DefaultKeyMaxAge is how long a Signer with a KeySource uses the keys it
// read before it reads them again: the bound on how long a rotated or
// revoked key stays in use (docs/trust.md, "The signing key").
const DefaultKeyMaxAge = 5 * time.Minute

// keyRetry is how soon a Signer tries again after a failed re-read, with
// the keys it has: a Secrets Manager outage does not stop the scheduler,
// and does not make every message read the secret.
const keyRetry = 30 * time.Second

// Signer authenticates what the scheduler sends an agent, so that a reply's
// echo can be believed without reading the order (docs/trust.md). The
// scheduler signs each agent.request with a key only it holds; the agent
// echoes the signature in its reply unread; the scheduler checks it against
// the reply's echo. An agent (or anyone who may send to the scheduler queue)
// can therefore report an outcome for a request it received, but cannot
// change the order, the step, the attempt, the holder, the workflow, the
// payload, where statuses go, or the lane.
//
// A Signer signs with the current key of its KeyRing and accepts the
// signatures of every key in it, so that keys can be rotated without
// dropping replies to requests signed before. One built on a KeySource
// reads the ring again when it is older than its maximum age (Refresh), so
// that a rotation, or a key's revocation, reaches every instance within
// that age.
type Signer struct {
	ring atomic.Pointer[keyRing]

	src    KeySource // nil: the ring never changes
	clock  Clock
	maxAge time.Duration
	mu     sync.Mutex // one re-read at a time
	next   atomic.Int64
}

// KeyRing is the keys a deployment signs with: Current signs every request;
// Accepted are the others whose signatures are still believed (a key being
// introduced, the key before a rotation), until they are removed.
type KeyRing struct {
	Current  []byte
	Accepted [][]byte
}

// KeySource reads a deployment's keys (fromaws reads them from Secrets
// Manager's AWSCURRENT, AWSPENDING and AWSPREVIOUS stages).
type KeySource func(context.Context) (KeyRing, error)

type key struct {
	id     string
	secret []byte
}

// keyRing is a KeyRing checked: the current key first.
type keyRing struct{ keys []key }

func newKeyRing(r KeyRing) (*keyRing, error) {
	var out keyRing
	for i, k := range append([][]byte{r.Current}, r.Accepted...) {
		if len(k) < MinSigningKeyBytes {
			what := "signing key"
			if i > 0 {
				what = fmt.Sprintf("accepted signing key %d", i)
			}
			return nil, fmt.Errorf("%s: %d bytes, want at least %d: %w", what, len(k), MinSigningKeyBytes, ErrInvalid)
		}
		id := KeyID(k)
		if slices.ContainsFunc(out.keys, func(o key) bool { return o.id == id }) {
			continue // the same key under two stages
		}
		out.keys = append(out.keys, key{id: id, secret: bytes.Clone(k)})
	}
	return &out, nil
}

// NewSigner returns a Signer on key, which must be at least
// MinSigningKeyBytes long, accepting the signatures of the accepted keys
// too.
func NewSigner(key []byte, accepted ...[]byte) (*Signer, error) {
	ring, err := newKeyRing(KeyRing{Current: key, Accepted: accepted})
	if err != nil {
		return nil, err
	}
	s := &Signer{}
	s.ring.Store(ring)
	return s, nil
}

// NewSourcedSigner returns a Signer on the keys src reads now, which it
// reads again on Refresh once they are maxAge old (DefaultKeyMaxAge when 0)
// by clock.
func NewSourcedSigner(ctx context.Context, src KeySource, clock Clock, maxAge time.Duration) (*Signer, error) {
	if clock == nil {
		clock = SystemClock{}
	}
	if maxAge <= 0 {
		maxAge = DefaultKeyMaxAge
	}
	r, err := src(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the signing keys: %w", err)
	}
	ring, err := newKeyRing(r)
	if err != nil {
		return nil, err
	}
	s := &Signer{src: src, clock: clock, maxAge: maxAge}
	s.ring.Store(ring)
	s.next.Store(clock.Now().Add(maxAge).UnixNano())
	return s, nil
}

// Refresh reads the keys again if they are older than the Signer's maximum
// age. When the read fails the Signer keeps the keys it has, tries again
// in keyRetry, and returns the error (for the caller to log). A Signer
// without a KeySource, or one whose keys are fresh, does nothing; while
// another goroutine reads them, neither does this one.
func (s *Signer) Refresh(ctx context.Context) error {
	if s.src == nil || s.clock.Now().UnixNano() < s.next.Load() {
		return nil
	}
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	now := s.clock.Now()
	if now.UnixNano() < s.next.Load() {
		return nil // another goroutine read them
	}
	r, err := s.src(ctx)
	if err == nil {
		var ring *keyRing
		if ring, err = newKeyRing(r); err == nil {
			s.ring.Store(ring)
			s.next.Store(now.Add(s.maxAge).UnixNano())
			return nil
		}
	}
	s.next.Store(now.Add(min(keyRetry, s.maxAge)).UnixNano())
	return fmt.Errorf("re-reading the signing keys (the ones read before are kept): %w", err)
}

// KeyIDs are the ids of the keys the Signer holds, the current one first.
func (s *Signer) KeyIDs() []string {
	var ids []string
	for _, k := range s.ring.Load().keys {
		ids = append(ids, k.id)
	}
	return ids
}

// KeyID names a key in a signature without giving it away: the first 8
// bytes of a SHA-256 of it, base64url. Every scheduler of a deployment
// computes the same id from the same key.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("sas signing key id\x00"))
	h.Write(key)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:8])
}

// NewSigningKey returns a fresh random key (a local run's, shared by its
// in-process schedulers).
func NewSigningKey() []byte {
	k := make([]byte, MinSigningKeyBytes)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on supported platforms
	}
	return k
}

// ParseSigningKey reads a key as a deployment stores it: the secret's
// string, base64 (standard or URL alphabet, padded or not) of at least
// MinSigningKeyBytes bytes, or else the string's own bytes if they are that
// long (a generated secret string).
func ParseSigningKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) >= MinSigningKeyBytes {
			return b, nil
		}
	}
	if len(s) >= MinSigningKeyBytes {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("signing key: %d characters, want at least %d bytes: %w", len(s), MinSigningKeyBytes, ErrInvalid)
}

// Signed is what a signature covers: every field a reply echoes from its
// request, the fence included. The outcome, result and reason are the
// agent's own to say and are not covered.
type Signed struct {
	OrderID      string
	Step         int
	StepName     string
	Agent        string
	Attempt      int
	LockedBy     string
	Compensation bool
	Workflow     string
	Version      string
	Payload      json.RawMessage
	ReplyTo      string
	Priority     int
	// Generation is covered too: a reply under an older one is alerted on
	// (docs/protocol.md, "Idempotency keys").
	Generation int
}

// Signed returns the fields of a request that its signature covers.
func (r AgentRequest) Signed() Signed {
	return Signed{OrderID: r.OrderID, Step: r.Step, StepName: r.StepName, Agent: r.Agent, Attempt: r.Attempt,
		LockedBy: r.LockedBy, Compensation: r.Compensation, Workflow: r.Workflow, Version: r.Version,
		Payload: r.Payload, ReplyTo: r.ReplyTo, Priority: r.Priority, Generation: r.Generation}
}

// Signed returns the fields of a reply that its request's signature covers.
func (r AgentReply) Signed() Signed {
	return Signed{OrderID: r.OrderID, Step: r.Step, StepName: r.StepName, Agent: r.Agent, Attempt: r.Attempt,
		LockedBy: r.LockedBy, Compensation: r.Compensation, Workflow: r.Workflow, Version: r.Version,
		Payload: r.Payload, ReplyTo: r.ReplyTo, Priority: r.Priority, Generation: r.Generation}
}

// Sign returns the signature of f with the current key: "v2.", the key's
// id, "." and the base64url HMAC-SHA256 of its fields, each length-prefixed
// so that no two field lists share bytes.
func (s *Signer) Sign(f Signed) string {
	k := s.ring.Load().keys[0]
	return sigPrefix + k.id + "." + base64.RawURLEncoding.EncodeToString(mac(k.secret, f))
}

// ErrBadSignature is a signature that does not match what it claims to sign.
var ErrBadSignature = errors.New("signature does not match")

// ErrUnknownKey is a signature by a key the Signer does not hold: one
// rotated out (revoked), or one it has not read yet.
var ErrUnknownKey = fmt.Errorf("%w: signed with a key this scheduler does not hold (rotated out, or not read yet)", ErrBadSignature)

// ErrUnsigned is a message that carries no signature (an agent built before
// signatures, or a message forged without one).
var ErrUnsigned = errors.New("no signature")

// Verify checks sig against f in constant time, with the key it names
// (v2), or with each key held (v1, a signature from before key ids).
func (s *Signer) Verify(f Signed, sig string) error {
	return s.verify(sig, func(secret []byte) []byte { return mac(secret, f) })
}

// SignBytes signs b for one purpose (a label no other use shares), with
// the same key and layout as a request: the scheduler's own notes on what
// it sends itself (a renewed message's count, scheduler.MaxRenewals).
func (s *Signer) SignBytes(purpose string, b []byte) string {
	k := s.ring.Load().keys[0]
	return sigPrefix + k.id + "." + base64.RawURLEncoding.EncodeToString(macBytes(k.secret, purpose, b))
}

// VerifyBytes checks a SignBytes signature in constant time, as Verify does.
func (s *Signer) VerifyBytes(purpose string, b []byte, sig string) error {
	return s.verify(sig, func(secret []byte) []byte { return macBytes(secret, purpose, b) })
}

// verify checks sig against the MAC macOf makes with the key sig names
// (v2), or with any key held (v1).
func (s *Signer) verify(sig string, macOf func(secret []byte) []byte) error {
	if sig == "" {
		return ErrUnsigned
	}
	ring := s.ring.Load()
	if rest, ok := strings.CutPrefix(sig, sigPrefix); ok {
		id, raw, ok := strings.Cut(rest, ".")
		if !ok {
			return ErrBadSignature
		}
		i := slices.IndexFunc(ring.keys, func(k key) bool { return k.id == id })
		if i < 0 {
			return ErrUnknownKey
		}
		return check(raw, macOf(ring.keys[i].secret))
	}
	raw, ok := strings.CutPrefix(sig, sigPrefixV1)
	if !ok {
		return ErrBadSignature
	}
	for _, k := range ring.keys {
		if check(raw, macOf(k.secret)) == nil {
			return nil
		}
	}
	return ErrBadSignature
}

// check compares a signature's MAC (base64url) with the one it must be, in
// constant time.
func check(raw string, want []byte) error {
	got, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}

func macBytes(secret []byte, purpose string, b []byte) []byte {
	m := hmac.New(sha256.New, secret)
	var n [8]byte
	for _, f := range [][]byte{[]byte("sas " + purpose + " v1"), b} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write(f)
	}
	return m.Sum(nil)
}

func mac(secret []byte, f Signed) []byte {
	m := hmac.New(sha256.New, secret)
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	num := func(i int) { field([]byte(fmt.Sprint(i))) }
	field([]byte("sas agent.request v1"))
	field([]byte(f.OrderID))
	num(f.Step)
	field([]byte(f.StepName))
	field([]byte(f.Agent))
	num(f.Attempt)
	field([]byte(f.LockedBy))
	if f.Compensation {
		num(1)
	} else {
		num(0)
	}
	field([]byte(f.Workflow))
	field([]byte(f.Version))
	field(canonicalPayload(f.Payload))
	field([]byte(f.ReplyTo))
	num(f.Priority)
	if f.Generation != 0 {
		num(f.Generation)
	}
	return m.Sum(nil)
}

// canonicalPayload is the payload as every message carries it: compacted
// (sas.Encode compacts raw JSON), absent and null alike empty.
func canonicalPayload(p json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, p); err != nil {
		return p // not JSON: sign the bytes as they are
	}
	if bytes.Equal(b.Bytes(), []byte("null")) {
		return nil
	}
	return b.Bytes()
}
