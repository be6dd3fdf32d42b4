package sas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestRunOrderID(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 2, 0, 0, 900e6, time.FixedZone("CET", 3600))
	id := sas.RunOrderID("nightly", at)
	require.Equal(t, "nightly-2026-11-28T01:00:00Z", id, "UTC, to the second, as EventBridge Scheduler writes it")
	require.True(t, sas.ValidOrderID(id))
	long := sas.RunOrderID("a234567890123456789012345678901234567890123456789012345678901234", at)
	require.True(t, sas.ValidOrderID(long), "the longest schedule name leaves a legal order id")

	known := func(n string) bool { return n == "nightly" || n == "a-b" }
	name, ok := sas.RunOf(id, known)
	require.True(t, ok)
	require.Equal(t, "nightly", name)
	name, ok = sas.RunOf(sas.RunOrderID("a-b", at), known)
	require.True(t, ok)
	require.Equal(t, "a-b", name)
	for _, other := range []string{"nightly", "nightly-2026-11-28", "weekly-2026-11-28T01:00:00Z", "nightly-2026-13-28T01:00:00Z", "o-1"} {
		_, ok := sas.RunOf(other, known)
		require.False(t, ok, other)
	}
}

// A schedule's run needs no order id: it is derived from the schedule and
// the scheduled time, and one given must be that one.
func TestParseIntakeOfARun(t *testing.T) {
	t.Parallel()
	rules := sas.IntakeRules{Workflows: func(string) bool { return true }}
	in, err := sas.ParseIntake([]byte(`{"workflow":"w","schedule":"nightly","scheduledAt":"2026-11-28T02:00:00Z"}`), rules)
	require.NoError(t, err)
	require.Equal(t, "nightly-2026-11-28T02:00:00Z", in.OrderID)
	_, err = sas.ParseIntake([]byte(`{"orderId":"nightly-2026-11-28T02:00:00Z","workflow":"w","schedule":"nightly","scheduledAt":"2026-11-28T03:00:00+01:00"}`), rules)
	require.NoError(t, err, "the same instant in another zone")

	for body, want := range map[string]string{
		`{"workflow":"w","schedule":"nightly"}`:                                                "invalid scheduledAt: required",
		`{"workflow":"w","schedule":"nightly","scheduledAt":"tomorrow"}`:                       "invalid scheduledAt: \"tomorrow\" is not an RFC 3339 time",
		`{"orderId":"o-1","workflow":"w","scheduledAt":"2026-11-28T02:00:00Z"}`:                "invalid scheduledAt: only a schedule's run has one",
		`{"workflow":"w","schedule":"night ly","scheduledAt":"2026-11-28T02:00:00Z"}`:          "invalid schedule: must be 1-64 characters",
		`{"orderId":"o-1","workflow":"w","schedule":"n","scheduledAt":"2026-11-28T02:00:00Z"}`: "invalid orderId: a run of schedule n scheduled for 2026-11-28T02:00:00Z is order n-2026-11-28T02:00:00Z",
	} {
		_, err := sas.ParseIntake([]byte(body), rules)
		require.ErrorIs(t, err, sas.ErrInvalid, body)
		require.ErrorContains(t, err, want, body)
	}
}
