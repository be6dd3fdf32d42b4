package inventory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/travel/inventory"
)

func TestHoldIsIdempotent(t *testing.T) {
	t.Parallel()
	inv := inventory.New("hotels", map[string]int{"Ritz": 2}, 0)
	first, err := inv.Hold("o-1:1", "Ritz")
	require.NoError(t, err)
	again, err := inv.Hold("o-1:1", "Ritz")
	require.NoError(t, err)
	require.Equal(t, first, again, "the stored answer")
	require.Equal(t, 1, inv.Left("Ritz"))
	require.Equal(t, 1, inv.Held())
}

func TestARefusalIsStoredToo(t *testing.T) {
	t.Parallel()
	inv := inventory.New("hotels", map[string]int{"full": 0}, 5)
	_, err := inv.Hold("o-1:1", "full")
	require.ErrorIs(t, err, inventory.ErrSoldOut)
	_, err = inv.Hold("o-1:1", "full")
	require.ErrorIs(t, err, inventory.ErrSoldOut)
	_, err = inv.Hold("o-2:1", "Ritz")
	require.NoError(t, err, "an item not listed has the default stock")
}

func TestReleaseGivesBackOnce(t *testing.T) {
	t.Parallel()
	inv := inventory.New("cars", nil, 3)
	_, err := inv.Hold("o-1:2", "compact")
	require.NoError(t, err)
	require.NoError(t, inv.Release("o-1:2"))
	require.NoError(t, inv.Release("o-1:2"))
	require.Equal(t, 3, inv.Left("compact"))
	require.Zero(t, inv.Held())
}

// The undo commutes with the do: a hold that arrives after its release has
// no effect, and keeps answering so.
func TestReleaseBeforeHoldCancelsIt(t *testing.T) {
	t.Parallel()
	inv := inventory.New("airline", nil, 3)
	require.NoError(t, inv.Release("o-1:0"))
	_, err := inv.Hold("o-1:0", "LH 123")
	require.ErrorIs(t, err, inventory.ErrCancelled)
	_, err = inv.Hold("o-1:0", "LH 123")
	require.ErrorIs(t, err, inventory.ErrCancelled)
	require.Equal(t, 3, inv.Left("LH 123"))
}

// A lost answer took effect: asking again under the same key gets the hold
// that was made, not a second one.
func TestALostAnswerIsNotASecondHold(t *testing.T) {
	t.Parallel()
	inv := inventory.New("cars", nil, 3)
	inv.DropAnswers(1)
	_, err := inv.Hold("o-1:2", "compact")
	require.ErrorIs(t, err, inventory.ErrUnavailable)
	h, err := inv.Hold("o-1:2", "compact")
	require.NoError(t, err)
	require.Equal(t, "compact", h.Item)
	require.Equal(t, 2, inv.Left("compact"))
}

// Cancel gives back a hold by the booking id its Hold answered, once; an id
// never answered is ErrUnknownRef.
func TestCancelByReference(t *testing.T) {
	t.Parallel()
	inv := inventory.New("hotels", nil, 2)
	h, err := inv.Hold("o-1:1", "Ritz")
	require.NoError(t, err)
	require.NoError(t, inv.Cancel(h.Ref))
	require.NoError(t, inv.Cancel(h.Ref), "twice is no error")
	require.Equal(t, 2, inv.Left("Ritz"))
	require.Zero(t, inv.Held())
	require.Equal(t, []string{h.Ref}, inv.Cancelled())
	require.ErrorIs(t, inv.Cancel("hotels-99"), inventory.ErrUnknownRef)
	_, err = inv.Hold("o-1:1", "Ritz")
	require.NoError(t, err, "the key's stored answer")
	require.Zero(t, inv.Held(), "a repeated hold of a cancelled booking takes nothing")
}

func TestASlowItemHoldsOnlyOnceItAnswers(t *testing.T) {
	t.Parallel()
	inv := inventory.New("hotels", nil, 5)
	inv.SetSlow("slow", time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := inv.HoldCtx(ctx, "o-1:1", "slow")
	require.ErrorIs(t, err, context.Canceled, "a call that ends before the answer")
	require.Equal(t, 0, inv.Held(), "holds nothing")

	inv.SetSlow("slow", time.Millisecond)
	h, err := inv.HoldCtx(context.Background(), "o-1:1", "slow")
	require.NoError(t, err)
	require.Equal(t, "slow", h.Item)
	require.Equal(t, 1, inv.Held())
	h2, err := inv.HoldCtx(context.Background(), "o-2:1", "Ritz")
	require.NoError(t, err, "an item not made slow answers at once")
	require.Equal(t, "Ritz", h2.Item)
}
