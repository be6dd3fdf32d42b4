package agenthost

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// DecodeRequest reads and checks an agent.request. A message that fails here
// can never be served: the caller logs the reason and drops it. What could be
// read is returned with the error, for the log.
//
// Unknown fields are allowed (a newer scheduler of the same message version
// may add some); the version must be this build's. A missing idempotency key
// is derived with sas.IdempotencyKey, the same as the scheduler's.
func DecodeRequest(body []byte) (sas.AgentRequest, error) {
	var req sas.AgentRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, &sas.ValidationError{Reason: "not an agent.request: " + jsonProblem(err)}
	}
	bad := func(field, reason string) (sas.AgentRequest, error) {
		return req, &sas.ValidationError{Field: field, Reason: reason}
	}
	switch {
	case req.V != 0 && req.V != sas.MessageVersion:
		return bad("v", fmt.Sprintf("unsupported message version %d (this agent reads %d)", req.V, sas.MessageVersion))
	case req.Kind != sas.KindAgentRequest:
		return bad("kind", fmt.Sprintf("%q is not %q", req.Kind, sas.KindAgentRequest))
	case !sas.ValidOrderID(req.OrderID):
		return bad("orderId", fmt.Sprintf("%q is not an order id", req.OrderID))
	case req.Step < 0:
		return bad("step", fmt.Sprintf("%d is negative", req.Step))
	case req.StepName == "":
		return bad("stepName", "required: it selects the step's action")
	case req.Agent == "":
		return bad("agent", "required")
	case req.Attempt < 1:
		return bad("attempt", fmt.Sprintf("%d: attempts count from 1", req.Attempt))
	case req.LockedBy == "":
		return bad("lockedBy", "required: the reply is fenced on it")
	case req.CompleteBy.IsZero():
		return bad("completeBy", "required: the agent must know when to stop")
	case req.TimeoutMs < 0 || req.TimeoutMs > maxTimeoutMs:
		return bad("timeoutMs", fmt.Sprintf("%d: want 0 (absent) or a positive number of milliseconds, at most %d", req.TimeoutMs, int64(maxTimeoutMs)))
	case !printableKey(req.IdempotencyKey):
		return bad("idempotencyKey", "must be printable ASCII without spaces, at most 255 characters")
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = sas.IdempotencyKey(req.OrderID, req.Step, 0, req.Compensation)
	}
	req.V = sas.MessageVersion
	return req, nil
}

// maxTimeoutMs bounds a request's TimeoutMs: a day is far beyond any step
// (SQS holds a message in flight for 12 hours at most), and keeps the
// deadline arithmetic clear of overflow.
const maxTimeoutMs = int64(24 * time.Hour / time.Millisecond)

// printableKey accepts what an Idempotency-Key header can carry as a plain
// token ("" is accepted: DecodeRequest derives one).
func printableKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// jsonProblem says what is wrong with a body in a line.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}
