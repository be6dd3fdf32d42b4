package sas_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestTenantOrderIDs(t *testing.T) {
	t.Parallel()
	ts := sas.Tenants{"acme": {Senders: []string{"AROAACME"}}, "acme-eu": {Senders: []string{"AROAEU"}}}
	for _, c := range []struct {
		submitter, id string
		ok            bool
	}{
		{"AROAACME", "acme:o-1", true},
		{"AROAACME", "o-1", false},
		{"AROAACME", "acme-eu:o-1", false},
		{"AROAEU", "acme-eu:o-1", true},
		{"AROAEU", "acme:o-1", false},
		{"AROAOTHER", "o-1", true},
		{"AROAOTHER", "acme:o-1", false},
		{"AROAOTHER", "acme-eu:o-1", false},
		{"AROAOTHER", "acme-o-1", true},
		{"", "acme:o-1", false},
		{"", "o-1", true},
	} {
		err := ts.CheckOrderID(c.submitter, c.id)
		require.Equal(t, c.ok, err == nil, "%s submits %s: %v", c.submitter, c.id, err)
		if err != nil {
			require.ErrorIs(t, err, sas.ErrInvalid)
		}
	}
	require.NoError(t, sas.Tenants(nil).CheckOrderID("AROAOTHER", "acme:o-1"), "no tenants: every id is anyone's, as before")
}
