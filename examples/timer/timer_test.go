package timer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/timer"
	"github.com/sas-go/sas/sastest"
)

type mailer struct {
	mu        sync.Mutex
	welcomed  []string
	reminders []string
}

func (m *mailer) Welcome(_ context.Context, _, email string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.welcomed = append(m.welcomed, email)
	return nil
}

func (m *mailer) Remind(_ context.Context, _, email, text string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reminders = append(m.reminders, email+": "+text)
	return nil
}

// Three days of trial pass in milliseconds of the wall clock; the reminder
// goes out once, 72 hours of the kit's clock after the sign-up, and says so.
func TestTheReminderGoesOutAfter72Hours(t *testing.T) {
	t.Parallel()
	m := &mailer{}
	env := sastest.New(t, timer.Workflows(), timer.CRM(m))
	start, wall := env.Now(), time.Now()
	res := env.Run("trial", "t-1", timer.Customer{Email: "ada@example.com"})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []string{"ada@example.com"}, m.welcomed)
	require.Equal(t, []string{"ada@example.com: your trial started 72h0m0s ago"}, m.reminders)
	require.GreaterOrEqual(t, env.Now().Sub(start), timer.Trial, "never early")
	require.Less(t, time.Since(wall), 10*time.Second)
}

// A sign-up that fails for good is never reminded: nothing waits.
func TestNoReminderWithoutASignUp(t *testing.T) {
	t.Parallel()
	m := &mailer{}
	env := sastest.New(t, timer.Workflows(), timer.CRM(m))
	res := env.Run("trial", "t-2", timer.Customer{})
	require.Equal(t, sastest.StatusFailed, res.Status)
	require.Empty(t, m.reminders)
}
