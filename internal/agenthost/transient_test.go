package agenthost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// Issue 19, a failure is not a wait: a request the agent ran and got no
// answer for is an attempt that failed, and a scheduler that takes the
// transient outcome (TransientOutcome) hears so at once, with the kind of
// failure; the request is acknowledged, not left to come back. Only a run
// its host cut short is left for redelivery.
func TestTransientOutcomeIsReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		err          error
		nonRetryable []string
		hostEnds     bool // the invocation ends before the step's deadline
		want         sas.Outcome
		wantType     string
		wantRetry    int64
	}{
		{"tries exhausted", fmt.Errorf("no outcome after 3 tries: %w", httpcall.ErrTransient), nil, false, sas.OutcomeTransient, "", 0},
		{"breaker open", fmt.Errorf("endpoint: %w", httpcall.ErrCircuitOpen), nil, false, sas.OutcomeTransient, sas.ErrorCircuitOpen, 0},
		{"step deadline", fmt.Errorf("cut: %w", httpcall.ErrDeadline), nil, false, sas.OutcomeTransient, sas.ErrorTimeout, 0},
		{"retry after", &agenthost.RedeliveryError{Delay: 90 * time.Second, Err: errors.New("429")}, nil, false, sas.OutcomeTransient, "", 90_000},
		{"a named error", typed{"InventoryDown", errors.New("inventory down")}, nil, false, sas.OutcomeTransient, "InventoryDown", 0},
		{"a non-retryable named error", typed{"InventoryDown", errors.New("inventory down")}, []string{"InventoryDown"}, false, sas.OutcomeFailed, "", 0},
		{"a non-retryable timeout", fmt.Errorf("cut: %w", httpcall.ErrDeadline), []string{"Timeout"}, false, sas.OutcomeFailed, "", 0},
		{"the host ending is not the step's failure", context.DeadlineExceeded, nil, true, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newServiceRig(t, memqueue.Options{})
			svc := r.service(agenthost.Config{Agents: payments(func(ctx context.Context, _ sas.AgentRequest) (json.RawMessage, error) {
				if tt.hostEnds {
					<-ctx.Done()
				}
				return nil, tt.err
			})})
			req := request("o-1", timeout(time.Hour), completeBy(clocktest.T0.Add(time.Hour)), func(r *sas.AgentRequest) {
				r.TransientOutcome, r.NonRetryable = true, tt.nonRetryable
			})
			ctx := t.Context()
			if tt.hostEnds {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
				defer cancel()
			}
			resp, err := svc.Handle(ctx, event(req))
			require.NoError(t, err)
			reps := r.replies()
			if tt.want == "" {
				require.Empty(t, reps)
				require.Len(t, resp.BatchItemFailures, 1, "left for redelivery")
				return
			}
			require.Empty(t, resp.BatchItemFailures, "acknowledged: the outcome is sent")
			require.Len(t, reps, 1)
			requireEcho(t, req, reps[0])
			require.Equal(t, tt.want, reps[0].Outcome)
			require.Equal(t, tt.wantType, reps[0].ErrorType)
			require.Equal(t, tt.wantRetry, reps[0].RetryAfterMs)
			require.NotEmpty(t, reps[0].Reason)
		})
	}
}

// A request from an older scheduler (no TransientOutcome) keeps the older
// behaviour: no reply, left for redelivery.
func TestNoTransientOutcomeForAnOlderScheduler(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, httpcall.ErrTransient
	})})
	resp, err := svc.Handle(t.Context(), event(request("o-1")))
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
	require.Empty(t, r.replies())
}

// A transient outcome that comes at or after the agent's deadline is still
// sent: it carries no answer to fetch again, and it is fenced on its
// attempt at the scheduler like any reply.
func TestLateTransientOutcomeIsSent(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		r.clock.Advance(6 * time.Second) // past the 5 s deadline
		return nil, httpcall.ErrTransient
	})})
	req := request("o-1", timeout(5*time.Second), func(r *sas.AgentRequest) { r.TransientOutcome = true })
	resp, err := svc.Handle(t.Context(), event(req))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeTransient, reps[0].Outcome)
}

// typed is an error that names its kind, as agenthost.Named's does.
type typed struct {
	name string
	err  error
}

func (e typed) Error() string     { return e.err.Error() }
func (e typed) Unwrap() error     { return e.err }
func (e typed) ErrorType() string { return e.name }
