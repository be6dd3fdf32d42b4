package msgctx

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/clocktest"
	"github.com/sas-go/sas/internal/sas"
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
