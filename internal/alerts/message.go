// Package alerts tells operators about order steps that need a person
// (sas.Alerter): over SNS, as EventBridge events, in the log, to several of
// those at once, or into memory for tests and the local runtime.
//
// Every adapter sends the same message: a short subject a person can read in
// a mail client or a pager, and a JSON body (Body) a person or a machine can
// act on, including the sasctl command that shows the order.
package alerts

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sas-go/sas/internal/sas"
)

// The EventBridge event's source and detail-type: what a rule matches on.
// Part of the contract with whoever subscribes; keep them stable.
const (
	Source     = "sas"
	DetailType = "OrderStepNeedsOperator"
)

// BodyVersion is the version of the Body document.
const BodyVersion = 1

const (
	// SNS refuses a subject of 100 characters or more, or one with line
	// breaks or characters outside printable ASCII.
	maxSubject = 99
	// A reason is an agent's or the supervisor's text; bound it so that one
	// long remote error cannot push a message past SNS's or EventBridge's
	// 256 KiB limit.
	maxReason = 4 << 10
)

// Body is the JSON document every adapter sends.
type Body struct {
	V        int              `json:"v"`
	Summary  string           `json:"summary"`
	OrderID  string           `json:"orderId"`
	Step     int              `json:"step"`
	StepName string           `json:"stepName,omitempty"`
	State    sas.ProcessState `json:"state"`
	Reason   string           `json:"reason"`
	Attempts int              `json:"attempts"`
	Failures int              `json:"failures"`
	Time     time.Time        `json:"time"`
	Source   string           `json:"source,omitempty"` // the actor that raised it
	// Inspect is the command an operator runs first.
	Inspect string `json:"inspect"`

	// ID is stable across re-sends of the same alert (sas.AlertID): a
	// receiver de-duplicates on it, since a give-up's alert is re-driven
	// until the supervisor has recorded it sent.
	ID string `json:"id,omitempty"`
}

// NewBody renders an alert.
func NewBody(a sas.Alert) Body {
	return Body{
		V:        BodyVersion,
		Summary:  Subject(a),
		OrderID:  a.OrderID,
		Step:     a.Step,
		StepName: a.StepName,
		State:    a.State,
		Reason:   truncate(a.Reason, maxReason),
		Attempts: a.Attempts,
		Failures: a.Failures,
		Time:     a.At.UTC(),
		Source:   a.Source,
		Inspect:  InspectCommand(a.OrderID),
		ID:       a.ID,
	}
}

// JSON encodes the body. It holds only strings, numbers and a time, so it
// cannot fail to encode.
func (b Body) JSON() string {
	out, err := json.Marshal(b)
	if err != nil {
		panic(fmt.Sprintf("encoding an alert body: %v", err)) // a programming error
	}
	return string(out)
}

// Subject is the one-line summary: what a person sees before opening the
// message. It satisfies SNS's subject rules (printable ASCII, under 100).
func Subject(a sas.Alert) string {
	step := fmt.Sprintf("step %d", a.Step)
	if a.StepName != "" {
		step += " (" + a.StepName + ")"
	}
	s := fmt.Sprintf("SAS: order %s %s is %s after %d failures", a.OrderID, step, a.State, a.Failures)
	return truncateASCII(printableASCII(s), maxSubject)
}

// InspectCommand is the CLI command that shows an order with its steps and
// history. Valid order ids need no quoting; anything else is single-quoted
// so that pasting the command into a shell is safe.
func InspectCommand(orderID string) string {
	if sas.ValidOrderID(orderID) {
		return "sasctl show " + orderID
	}
	return "sasctl show '" + strings.ReplaceAll(orderID, "'", `'\''`) + "'"
}

func printableASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

func truncateASCII(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " [truncated]"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
