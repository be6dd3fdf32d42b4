package httpcall_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A base URL's credentials reach no error the caller returns: not a
// refused status's, not a transport failure's (net/http masks only the
// password), not an open circuit's.
func TestErrorsNameNoCredentials(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{Status: http.StatusBadRequest, Body: "no"})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	for name, endpoint := range map[string]string{
		"refused":   strings.Replace(svc.srv.URL, "http://", "http://carol:s3cret@", 1),
		"transport": "http://carol:s3cret@" + deadAddr,
	} {
		clock := newFakeClock()
		cfg := testConfig(clock)
		cfg.MaxTries = 1
		_, err := newCaller(t, cfg).Call(context.Background(), newRequest(endpoint, clock))
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "s3cret", name)
		require.NotContains(t, err.Error(), "carol", name)
		require.Contains(t, err.Error(), "***@", name)
	}
}
