package msgctx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

func TestLinesCarryTheMessageAndTrace(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := Logger(slog.New(slog.NewJSONHandler(&buf, nil))).With("owner", "s-1")
	require.Same(t, log, Logger(log), "wrapped once")
	tr := sas.NewTrace("o-1", clocktest.T0)
	ctx := WithTrace(WithMessage(context.Background(), "m-1"), tr)
	log.InfoContext(ctx, "duplicate intake: order exists", "order", "o-1")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "m-1", line["messageId"])
	require.Equal(t, sas.TraceID(tr), line["traceId"])
	require.Equal(t, "o-1", line["order"])
	require.Equal(t, "s-1", line["owner"])

	buf.Reset()
	log.InfoContext(WithTrace(WithMessage(context.Background(), ""), "junk"), "no message")
	require.NotContains(t, buf.String(), "messageId")
	require.NotContains(t, buf.String(), "traceId")
}

// What a sender wrote reaches the logs through reasons, errors and echoed
// fields: every value is cut, whatever its kind (issue 29, §3).
func TestEveryValueIsBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	long := strings.Repeat("w", 10_000)
	log := Logger(slog.New(slog.NewJSONHandler(&buf, nil))).With("with", long)
	log.InfoContext(context.Background(), "message dropped", "reason", long, "error", errors.New(long),
		slog.Group("g", "inner", long), "list", []string{long}, "n", 42)
	require.Less(t, buf.Len(), 6*sas.MaxReasonBytes+512, "five long values of 1 KiB at most, and the rest")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	for _, k := range []string{"with", "reason", "error", "list"} {
		require.Contains(t, line[k], "[cut: ", k)
	}
	require.Contains(t, line["g"].(map[string]any)["inner"], "[cut: ")
	require.EqualValues(t, 42, line["n"], "numbers are kept as they are")

	buf.Reset()
	log.Info("short", "reason", "kept", "error", errors.New("kept too"))
	require.Contains(t, buf.String(), `"reason":"kept","error":"kept too"`)
}
