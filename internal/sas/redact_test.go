package sas_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://user:s3cret@pay.example/v1":                    "https://***@pay.example/v1",
		"https://token@pay.example":                             "https://***@pay.example",
		`calling POST "http://u:p%40ss@127.0.0.1:9/x": refused`: `calling POST "http://***@127.0.0.1:9/x": refused`,
		"two: https://a:b@h1/ and sqs+http://c:d@h2":            "two: https://***@h1/ and sqs+http://***@h2",
		"no credentials: https://pay.example/v1?to=a@b.example": "no credentials: https://pay.example/v1?to=a@b.example",
		"an address, not a URL: ops@example.com":                "an address, not a URL: ops@example.com",
		"":                                                      "",
	} {
		require.Equal(t, want, sas.Redact(in), in)
	}
}

// Every reason is redacted on its way to the record, the history, the
// alert and the status: BoundReason is that way.
func TestBoundReasonRedacts(t *testing.T) {
	t.Parallel()
	got := sas.BoundReason(`calling POST https://user:s3cret@pay.example/charges: 500`)
	require.NotContains(t, got, "s3cret")
	require.NotContains(t, got, "user")
	long := sas.BoundReason("https://user:s3cret@pay.example " + strings.Repeat("x", 2*sas.MaxReasonBytes))
	require.NotContains(t, long, "s3cret")
	require.LessOrEqual(t, len(long), sas.MaxReasonBytes)
}
