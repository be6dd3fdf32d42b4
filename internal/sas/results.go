package sas

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The bounds on what steps return (docs/protocol.md, "Results"). A step's
// result is recorded on its own step record (one DynamoDB item, within its
// 400 KB) and carried to the steps that follow it, so every request stays
// within SQS's message size: the results of one order, encoded as the
// request's "results" object (step names included), take at most
// MaxOrderResultsBytes, one step's at most MaxResultBytes. A result past
// either bound fails the step that produced it (ErrorResultTooLarge): its
// effect happened, so the order is compensated and the step undone.
const (
	// MaxResultBytes bounds one step's result, compacted JSON.
	MaxResultBytes = 16 << 10
	// MaxOrderResultsBytes bounds the results of all an order's steps, as
	// a request's or a status's "results" object.
	MaxOrderResultsBytes = 64 << 10
)

// ErrorResultTooLarge names the failure of a step whose result is over
// MaxResultBytes, or brings its order's results over MaxOrderResultsBytes.
const ErrorResultTooLarge = "ResultTooLarge"

// Results are the results of an order's steps, by step name: what a
// request carries of the steps its step follows (agent.Request's
// DecodeResult), and what the processed status tells the submitter. A step
// that returned nothing has no entry.
type Results map[string]json.RawMessage

// Size is the bytes r takes in a message: its encoded JSON object.
func (r Results) Size() int {
	if len(r) == 0 {
		return 0
	}
	b, err := Marshal(r)
	if err != nil {
		return MaxOrderResultsBytes + 1 // not JSON: never carried
	}
	return len(b)
}

// CompactResult is a result as it is recorded and carried: compacted JSON,
// nil for none (empty, or JSON null).
func CompactResult(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("the result is not JSON: %w", err)
	}
	if buf.String() == "null" {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// ResultTooLarge is the reason a step fails when its result (n bytes,
// compacted) is over MaxResultBytes: "" when it is within.
func ResultTooLarge(step string, n int) string {
	if n <= MaxResultBytes {
		return ""
	}
	return fmt.Sprintf("%s: step %s returned a result of %d bytes, over the %d-byte limit per step; its effect is undone",
		ErrorResultTooLarge, step, n, MaxResultBytes)
}

// OrderResultsTooLarge is the reason a step fails when its result brings
// its order's results (all bytes) over MaxOrderResultsBytes: "" when within.
func OrderResultsTooLarge(step string, all int) string {
	if all <= MaxOrderResultsBytes {
		return ""
	}
	return fmt.Sprintf("%s: step %s's result brings the order's results to %d bytes, over the %d-byte limit per order; its effect is undone",
		ErrorResultTooLarge, step, all, MaxOrderResultsBytes)
}

// ResultsBefore collects the results recorded on steps, by name, of every
// step whose index is below end: what the request of step end carries (a
// step follows every step before it). An undo of step k sees the results
// up to its own: ResultsBefore(steps, k+1).
func ResultsBefore(steps []StepRecord, end int) Results {
	var out Results
	for _, r := range steps {
		if r.Step >= end || len(r.Result) == 0 {
			continue
		}
		if out == nil {
			out = Results{}
		}
		out[r.StepName] = r.Result
	}
	return out
}
