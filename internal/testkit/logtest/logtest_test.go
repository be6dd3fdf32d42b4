package logtest_test

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/testkit/logtest"
)

// Loggers on many goroutines write whole lines to one Buffer; Records finds
// them by message and skips what is not JSON.
func TestBufferTakesConcurrentLoggers(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { log.Info("step done", "step", i) })
	}
	wg.Wait()
	_, _ = buf.Write([]byte("not json\n"))
	log.Warn("other")

	require.Len(t, buf.Records("step done"), 50)
	require.Len(t, buf.Records(""), 51, "every JSON line, the other one included")
	seen := map[float64]bool{}
	for _, r := range buf.Records("step done") {
		seen[r["step"].(float64)] = true
	}
	require.Len(t, seen, 50, "each line whole")
	require.Contains(t, buf.String(), "not json")
}
