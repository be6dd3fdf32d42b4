package schedules_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/schedules"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

const file = `{"schedules": [
  {"name": "nightly", "expression": "cron(0 2 * * ? *)", "timeZone": "Europe/Paris", "workflow": "recon", "payload": {"ledger": "main"}, "overlap": "skip"},
  {"name": "weekdays", "expression": "cron(30 9 ? * 2-6 *)", "workflow": "recon"},
  {"name": "hourly", "expression": "rate(1 hour)", "workflow": "recon"}
]}`

// The expressions are EventBridge Scheduler's: a cron in its time zone,
// days of the week counted from Sunday = 1, a rate.
func TestNext(t *testing.T) {
	t.Parallel()
	ss, err := schedules.Parse("s.json", []byte(file))
	require.NoError(t, err)
	from := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) // a Friday
	require.Equal(t, time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC), ss[0].Next(from), "02:00 in Paris is 01:00 UTC in winter")
	require.Equal(t, time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC), ss[1].Next(from), "Monday (2) to Friday (6): not the weekend")
	require.Equal(t, from.Add(time.Hour), ss[2].Next(from))
}

func TestParseChecks(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"schedules":[{"name":"a b","expression":"rate(1 hour)","workflow":"w"}]}`:                         "name must be",
		`{"schedules":[{"name":"a","expression":"every hour","workflow":"w"}]}`:                             `expression "every hour"`,
		`{"schedules":[{"name":"a","expression":"cron(0 2 L * ? *)","workflow":"w"}]}`:                      "L, W and #",
		`{"schedules":[{"name":"a","expression":"cron(0 2 * * ? 2027)","workflow":"w"}]}`:                   "the year must be *",
		`{"schedules":[{"name":"a","expression":"rate(1 hour)","workflow":"w","overlap":"buffer"}]}`:        `overlap "buffer"`,
		`{"schedules":[{"name":"a","expression":"rate(1 hour)","workflow":"w","timeZone":"Mars/Olympus"}]}`: "time zone",
		`{"schedules":[{"name":"a","expression":"rate(1 hour)"}]}`:                                          "workflow: required",
		`{"schedules":[{"name":"a","expression":"rate(1 hour)","workflow":"w","cron":"x"}]}`:                "unknown field",
	} {
		_, err := schedules.Parse("s.json", []byte(body))
		require.ErrorContains(t, err, want, body)
	}
	// The stack's Schedules output, a bare list, reads too.
	ss, err := schedules.Parse("out", []byte(`[{"name":"a","expression":"rate(1 hour)","timeZone":"UTC","flexibleWindowMinutes":15,"workflow":"w","overlap":"allow"}]`))
	require.NoError(t, err)
	require.Len(t, ss, 1)
}

// The loop sends each run once, as it falls due, with the intake the
// construct's target sends: the same run's order id as in the cloud.
func TestLoopSendsEachRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ss, err := schedules.Parse("s.json", []byte(file))
	require.NoError(t, err)
	clock := clocktest.New(time.Date(2026, 11, 27, 23, 30, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Options{Clock: clock})
	c, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "intake"})
	require.NoError(t, err)
	l := &schedules.Loop{Schedules: ss, Queue: q, IntakeURL: c.URL}

	sent, err := l.RunOnce(ctx, clock.Now()) // arms
	require.NoError(t, err)
	require.Empty(t, sent)
	clock.Advance(2 * time.Hour) // 01:30 UTC: nightly (01:00) and hourly (00:30, 01:30) are due
	sent, err = l.RunOnce(ctx, clock.Now())
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"nightly-2026-11-28T01:00:00Z", "hourly-2026-11-28T00:30:00Z", "hourly-2026-11-28T01:30:00Z"}, sent)
	sent, err = l.RunOnce(ctx, clock.Now())
	require.NoError(t, err)
	require.Empty(t, sent, "nothing twice")

	msgs, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: c.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	var nightly sas.Intake
	for _, m := range msgs {
		in, err := sas.ParseIntake([]byte(m.Body), sas.IntakeRules{})
		require.NoError(t, err)
		if in.Schedule == "nightly" {
			nightly = in
		}
	}
	require.Equal(t, "nightly-2026-11-28T01:00:00Z", nightly.OrderID)
	require.JSONEq(t, `{"ledger":"main"}`, string(nightly.Payload))
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(ss[0].Trigger(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC))), &raw))
	require.Empty(t, raw["orderId"], "the id is the scheduler's to derive, as from EventBridge Scheduler")
}
