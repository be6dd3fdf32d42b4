package bank_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/travel/bank"
)

func TestChargeIsIdempotent(t *testing.T) {
	t.Parallel()
	b := bank.New(1000)
	first, err := b.Charge("o-1:3", 420)
	require.NoError(t, err)
	again, err := b.Charge("o-1:3", 420)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Equal(t, 420, b.Balance())
}

func TestOverTheLimitIsDeclined(t *testing.T) {
	t.Parallel()
	b := bank.New(1000)
	_, err := b.Charge("o-1:3", 1001)
	require.ErrorIs(t, err, bank.ErrDeclined)
	require.Zero(t, b.Balance())
}

func TestRefundCommutesWithTheCharge(t *testing.T) {
	t.Parallel()
	b := bank.New(1000)
	_, err := b.Charge("o-1:3", 420)
	require.NoError(t, err)
	require.NoError(t, b.Refund("o-1:3"))
	require.NoError(t, b.Refund("o-1:3"))
	require.Zero(t, b.Balance(), "refunded once")

	require.NoError(t, b.Refund("o-2:3"))
	_, err = b.Charge("o-2:3", 420)
	require.ErrorIs(t, err, bank.ErrCancelled, "a charge after its refund has no effect")
	require.Zero(t, b.Balance())
}
