package sas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A body that is JSON but not an object is rejected with a reason an
// operator can read, not one naming the Go type it failed to decode into.
func TestParseIntakeNotAnObject(t *testing.T) {
	t.Parallel()
	for body, kind := range map[string]string{
		`[{"orderId":"a","workflow":"payment"}]`: "array",
		`"an order"`:                             "string",
		`42`:                                     "number",
	} {
		_, err := ParseIntake([]byte(body), IntakeRules{})
		require.ErrorIs(t, err, ErrInvalid, body)
		require.Contains(t, err.Error(), "must be a JSON object, not "+kind, body)
		require.NotContains(t, err.Error(), "sas.Intake", body)
	}
}
