package expense_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/expense"
	"github.com/sas-go/sas/sastest"
)

// ledger is an in-memory finance service.
type ledger struct {
	mu       sync.Mutex
	reserved map[string]int
	paid     map[string]string // key -> approver
}

func newLedger() *ledger { return &ledger{reserved: map[string]int{}, paid: map[string]string{}} }

func (l *ledger) Reserve(_ context.Context, key string, amount int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved[key] = amount
	return nil
}

func (l *ledger) Release(_ context.Context, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reserved, key[:len(key)-len(":undo")])
	return nil
}

func (l *ledger) Pay(_ context.Context, key string, _ int, by string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paid[key] = by
	return nil
}

func run(t *testing.T, answer *sastest.Answer, id string) (sastest.Result, *ledger) {
	l := newLedger()
	env := sastest.New(t, expense.Workflows(), expense.Finance(l))
	if answer != nil {
		env.Answer("approve", *answer)
	}
	return env.Run("expense", id, expense.Expense{ID: id, Amount: 120}), l
}

// Approved a day later: paid, the approver's name carried to the payment.
func TestApprovedIsPaid(t *testing.T) {
	t.Parallel()
	res, l := run(t, &sastest.Answer{After: 24 * time.Hour, Result: expense.Approval{By: "alice"}}, "x-1")
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, map[string]string{"x-1:2": "alice"}, l.paid)
	require.Equal(t, map[string]int{"x-1:0": 120}, l.reserved)
}

// Rejected: the budget is released, nothing is paid, the order ends
// Rejected and nobody is paged about it.
func TestRejectedEndsRejected(t *testing.T) {
	t.Parallel()
	res, l := run(t, &sastest.Answer{After: 2 * time.Hour, Fail: "not a business expense", Reject: true}, "x-2")
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Empty(t, l.paid)
	require.Empty(t, l.reserved)
	require.Equal(t, []string{"reserve"}, res.Undone)
}

// Nobody answers within three days: the approval is given up, an operator
// told, the budget released.
func TestUnansweredIsGivenUp(t *testing.T) {
	t.Parallel()
	res, l := run(t, nil, "x-3")
	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Empty(t, l.paid)
	require.Empty(t, l.reserved)
	require.NotEmpty(t, res.Alerts)
}
