package sas

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MinSigningKeyBytes is the shortest key a Signer takes: HMAC-SHA256's
// block of security, 256 bits.
const MinSigningKeyBytes = 32

// sigPrefix versions the signature's layout; a signature without it is
// not one this build wrote.
const sigPrefix = "v1."

// Signer authenticates what the scheduler sends an agent, so that a reply's
// echo can be believed without reading the order (docs/trust.md). The
// scheduler signs each agent.request with a key only it holds; the agent
// echoes the signature in its reply unread; the scheduler checks it against
// the reply's echo. An agent (or anyone who may send to the scheduler queue)
// can therefore report an outcome for a request it received, but cannot
// change the order, the step, the attempt, the holder, the workflow, the
// payload, where statuses go, or the lane.
type Signer struct {
	key []byte
}

// NewSigner returns a Signer on key, which must be at least
// MinSigningKeyBytes long.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinSigningKeyBytes {
		return nil, fmt.Errorf("signing key: %d bytes, want at least %d: %w", len(key), MinSigningKeyBytes, ErrInvalid)
	}
	return &Signer{key: bytes.Clone(key)}, nil
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

// Sign returns the signature of f: "v1." and the base64url HMAC-SHA256 of
// its fields, each length-prefixed so that no two field lists share bytes.
func (s *Signer) Sign(f Signed) string {
	return sigPrefix + base64.RawURLEncoding.EncodeToString(s.mac(f))
}

// ErrBadSignature is a signature that does not match what it claims to sign.
var ErrBadSignature = errors.New("signature does not match")

// ErrUnsigned is a message that carries no signature (an agent built before
// signatures, or a message forged without one).
var ErrUnsigned = errors.New("no signature")

// Verify checks sig against f in constant time.
func (s *Signer) Verify(f Signed, sig string) error { return check(sig, s.mac(f)) }

// check compares a signature with the MAC it must carry, in constant time.
func check(sig string, want []byte) error {
	if sig == "" {
		return ErrUnsigned
	}
	raw, ok := strings.CutPrefix(sig, sigPrefix)
	if !ok {
		return ErrBadSignature
	}
	got, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}

// SignBytes signs b for one purpose (a label no other use shares), with
// the same key and layout as a request: the scheduler's own notes on what
// it sends itself (a renewed message's count, scheduler.MaxRenewals).
func (s *Signer) SignBytes(purpose string, b []byte) string {
	return sigPrefix + base64.RawURLEncoding.EncodeToString(s.macBytes(purpose, b))
}

// VerifyBytes checks a SignBytes signature in constant time.
func (s *Signer) VerifyBytes(purpose string, b []byte, sig string) error {
	return check(sig, s.macBytes(purpose, b))
}

func (s *Signer) macBytes(purpose string, b []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	var n [8]byte
	for _, f := range [][]byte{[]byte("sas " + purpose + " v1"), b} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write(f)
	}
	return m.Sum(nil)
}

func (s *Signer) mac(f Signed) []byte {
	m := hmac.New(sha256.New, s.key)
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
