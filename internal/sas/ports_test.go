package sas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParamsWithDefaults(t *testing.T) {
	t.Parallel()
	fd, err := FindDueParams{State: Processing}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultPageLimit, fd.Limit)
	fd, err = FindDueParams{State: Pending, Limit: 7}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, 7, fd.Limit)
	_, err = FindDueParams{State: Error}.WithDefaults()
	require.ErrorIs(t, err, ErrInvalid, "Error records wait for an operator: never due")

	ls, err := ListByStateParams{State: Error}.WithDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultPageLimit, ls.Limit)
	_, err = ListByStateParams{State: Processed}.WithDefaults()
	require.ErrorIs(t, err, ErrInvalid, "Processed records are not indexed")
}
