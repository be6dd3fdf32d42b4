package agenthost

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestResultOf(t *testing.T) {
	t.Parallel()
	require.Nil(t, resultOf(nil))
	require.Nil(t, resultOf([]byte(" \n")))
	require.Equal(t, `{"a":1}`, string(resultOf([]byte(`{"a":1}`))))
	require.Equal(t, `"plain text"`, string(resultOf([]byte("plain text\n"))))
	require.Equal(t, `"<p>a & b</p>"`, string(resultOf([]byte("<p>a & b</p>"))), "no HTML escaping")
}
