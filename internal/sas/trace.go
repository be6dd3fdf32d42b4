package sas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A trace context ties one order's work across the scheduler, the agents
// and the supervisor into one trace (docs/observability.md, "One order, one
// trace"). It is a W3C traceparent, "00-<trace id>-<span id>-<flags>",
// carried as the "trace" field of every message about the order and stored
// with the order. The trace id is the order's for good: the submitter's,
// when its intake carries one, else made at intake. Each message gets its
// own span id, derived from what it is, so that a redelivery or a re-send of
// the same message carries the same context, and no randomness enters the
// protocol (the simulator replays a seed exactly).

var traceParentPattern = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$`)

// ValidTrace reports whether s is a traceparent this deployment carries
// (version 00, a non-zero trace id and span id).
func ValidTrace(s string) bool {
	m := traceParentPattern.FindStringSubmatch(s)
	return m != nil && m[1] != zeros(32) && m[2] != zeros(16)
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// TraceID is the trace id of a traceparent, "" when it is not valid.
func TraceID(trace string) string {
	if !ValidTrace(trace) {
		return ""
	}
	return trace[3:35]
}

// NewTrace makes the trace context of an order whose intake carried none.
// Its trace id starts with the intake's time in seconds, as an X-Ray trace
// id does (X-Ray takes a W3C trace id only if its first 8 digits are a
// recent time), and ends with a digest of the order id.
func NewTrace(orderID string, now time.Time) string {
	sum := sha256.Sum256([]byte("trace\x00" + orderID))
	id := fmt.Sprintf("%08x%s", uint32(now.Unix()), hex.EncodeToString(sum[:12]))
	return "00-" + id + "-" + spanID(id, "intake") + "-01"
}

// ChildTrace is the context of a message sent on behalf of parent: the same
// trace id and flags, a span id derived from parent's and what (the
// message's identity: its kind, idempotency key, attempt). "" when parent
// is not valid (a message from a build before traces).
func ChildTrace(parent, what string) string {
	if !ValidTrace(parent) {
		return ""
	}
	return parent[:36] + spanID(parent[36:52], what) + parent[52:]
}

func spanID(parent, what string) string {
	sum := sha256.Sum256([]byte(parent + "\x00" + what))
	if s := hex.EncodeToString(sum[:8]); s != zeros(16) {
		return s
	}
	return "0000000000000001"
}

// OrderTrace is the trace context of an order's messages: the first of
// traces that is valid (the message's own, then the stored order's).
func OrderTrace(traces ...string) string {
	for _, t := range traces {
		if ValidTrace(t) {
			return t
		}
	}
	return ""
}

// XRayTraceHeader is the X-Ray trace header of a traceparent, the value of
// SQS's AWSTraceHeader message system attribute, with which X-Ray joins the
// Lambda invocation a message starts to the trace it names
// (docs/observability.md, "X-Ray"): "Root=1-<8 hex>-<24 hex>;Parent=<16
// hex>;Sampled=<0|1>". The W3C trace id's 32 hex digits are X-Ray's
// "1-" + the first 8 + "-" + the last 24; the span id is the parent; the
// sampled flag is the traceparent's. "" when trace is not valid.
func XRayTraceHeader(trace string) string {
	if !ValidTrace(trace) {
		return ""
	}
	id, span, flags := trace[3:35], trace[36:52], trace[53:55]
	sampled := "0"
	if f, _ := strconv.ParseUint(flags, 16, 8); f&1 == 1 { // the W3C sampled flag
		sampled = "1"
	}
	return "Root=1-" + id[:8] + "-" + id[8:] + ";Parent=" + span + ";Sampled=" + sampled
}

var (
	xrayRootPattern   = regexp.MustCompile(`^1-([0-9a-f]{8})-([0-9a-f]{24})$`)
	xraySpanPattern   = regexp.MustCompile(`^[0-9a-f]{16}$`)
	xraySampledValues = map[string]string{"1": "01", "0": "00", "": "00", "?": "00"}
)

// TraceFromXRayHeader is the traceparent of an X-Ray trace header (the
// inverse of XRayTraceHeader; its fields in any order, others such as
// Lineage ignored); "" when the header has no valid Root and Parent.
func TraceFromXRayHeader(h string) string {
	var root, parent, sampled string
	for _, part := range strings.Split(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v
		}
	}
	m := xrayRootPattern.FindStringSubmatch(root)
	flags, ok := xraySampledValues[sampled]
	if m == nil || !xraySpanPattern.MatchString(parent) || !ok {
		return ""
	}
	t := "00-" + m[1] + m[2] + "-" + parent + "-" + flags
	if !ValidTrace(t) {
		return ""
	}
	return t
}
