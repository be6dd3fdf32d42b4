package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testDefinitions: a definition is kept by name and version, unchanged by
// a second put, told apart from its other versions, and an order keeps the
// version it was submitted with (sas.DefinitionStore).
func testDefinitions(t *testing.T, h Harness) {
	s := h.New(t).Store
	v1 := sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "flight", Agent: "flights", Action: "reserve", Undo: "cancel", Timeout: 30 * time.Second, MaxFailures: 4, BaseBackoff: time.Second, MaxBackoff: time.Minute, Tries: 5},
		{Name: "charge", Agent: "payments", Action: "POST /payments", Timeout: time.Minute, WaitLimit: 5 * time.Minute, TotalLimit: time.Hour},
	}}
	v2 := sas.Workflow{Name: "trip", Steps: append([]sas.StepDef{{Name: "hotel", Agent: "hotels", Action: "book", Timeout: 10 * time.Second}}, v1.Steps...)}
	require.NotEqual(t, v1.Version(), v2.Version())

	_, err := s.GetDefinition(ctx, "trip", v1.Version())
	require.ErrorIs(t, err, sas.ErrNotFound)
	require.NoError(t, s.PutDefinition(ctx, v1))
	require.NoError(t, s.PutDefinition(ctx, v1), "a second put of the same version changes nothing")
	require.NoError(t, s.PutDefinition(ctx, v2))

	got1, err := s.GetDefinition(ctx, "trip", v1.Version())
	require.NoError(t, err)
	require.Equal(t, v1, got1)
	got2, err := s.GetDefinition(ctx, "trip", v2.Version())
	require.NoError(t, err)
	require.Equal(t, v2, got2)
	_, err = s.GetDefinition(ctx, "other", v1.Version())
	require.ErrorIs(t, err, sas.ErrNotFound, "a version belongs to its workflow")

	o := sas.Order{OrderID: "o-versioned", Workflow: "trip", Steps: v1.StepNames(), Version: v1.Version()}
	_, err = s.Submit(ctx, sas.SubmitParams{Order: o, Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, v1.Version(), get(t, s, "o-versioned").Order.Version)
}
