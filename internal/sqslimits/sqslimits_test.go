package sqslimits_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

func outbound(n, size int) []sas.OutboundMessage {
	msgs := make([]sas.OutboundMessage, n)
	for i := range msgs {
		msgs[i] = sas.OutboundMessage{ID: fmt.Sprintf("m%d", i), Body: strings.Repeat("x", size)}
	}
	return msgs
}

func TestChunks(t *testing.T) {
	t.Parallel()
	sizes := func(batches [][]sas.OutboundMessage) []int {
		var out []int
		for _, b := range batches {
			out = append(out, len(b))
		}
		return out
	}
	kib := 1024
	for _, tc := range []struct {
		name string
		msgs []sas.OutboundMessage
		want []int
	}{
		{"25 small", outbound(25, 10), []int{10, 10, 5}},
		{"10 small", outbound(10, 10), []int{10}},
		{"3 of 100 KiB", outbound(3, 100*kib), []int{2, 1}},
		{"2 of 128 KiB fit exactly", outbound(2, 128*kib), []int{2}},
		{"one byte over", append(outbound(2, 128*kib), sas.OutboundMessage{ID: "x", Body: "y"}), []int{2, 1}},
		{"max bodies", outbound(3, sqslimits.MaxBodyBytes), []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := sqslimits.Chunks(tc.msgs)
			assert.Equal(t, tc.want, sizes(got))
			for _, b := range got {
				size := 0
				for _, m := range b {
					size += len(m.Body)
				}
				assert.LessOrEqual(t, size, sqslimits.MaxBatchBytes)
			}
		})
	}
	assert.Equal(t, []int{10, 10, 5}, func() []int {
		var out []int
		for _, c := range sqslimits.ReceiptChunks(make([]string, 25)) {
			out = append(out, len(c))
		}
		return out
	}())
}

func TestCheckMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		m     sas.OutboundMessage
		valid bool
	}{
		{"plain", sas.OutboundMessage{Body: "x"}, true},
		{"tab newline return", sas.OutboundMessage{Body: "\t\n\r"}, true},
		{"replacement character", sas.OutboundMessage{Body: "\uFFFD"}, true},
		{"emoji", sas.OutboundMessage{Body: "\U0001F600"}, true},
		{"max body", sas.OutboundMessage{Body: strings.Repeat("x", sqslimits.MaxBodyBytes)}, true},
		{"max delay", sas.OutboundMessage{Body: "x", Delay: sqslimits.MaxDelay}, true},
		{"delay rounds up within 15 min", sas.OutboundMessage{Body: "x", Delay: sqslimits.MaxDelay - 500*time.Millisecond}, true},
		{"empty", sas.OutboundMessage{}, false},
		{"one byte too big", sas.OutboundMessage{Body: strings.Repeat("x", sqslimits.MaxBodyBytes+1)}, false},
		{"delay rounds up past 15 min", sas.OutboundMessage{Body: "x", Delay: sqslimits.MaxDelay + time.Millisecond}, false},
		{"negative delay", sas.OutboundMessage{Body: "x", Delay: -time.Second}, false},
		{"NUL", sas.OutboundMessage{Body: "a\x00"}, false},
		{"control", sas.OutboundMessage{Body: "\x1f"}, false},
		{"U+FFFE", sas.OutboundMessage{Body: "\uFFFE"}, false},
		{"not UTF-8", sas.OutboundMessage{Body: "a\xff"}, false},
	} {
		f := sqslimits.CheckMessage(tc.m)
		if tc.valid {
			assert.Nil(t, f, tc.name)
		} else if assert.NotNil(t, f, tc.name) {
			assert.True(t, f.SenderFault, tc.name)
		}
	}
}

func TestCheckSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    time.Duration
		want int32
		ok   bool
	}{
		{"zero", 0, 0, true},
		{"rounds up", 1500 * time.Millisecond, 2, true},
		{"the limit", sqslimits.MaxWait, 20, true},
		{"rounds up past the limit", sqslimits.MaxWait + time.Nanosecond, 0, false},
		{"negative", -time.Second, 0, false},
		{"far past the limit", 1 << 62, 0, false},
	} {
		got, err := sqslimits.CheckSeconds("Wait", tc.d, sqslimits.MaxWait)
		if !tc.ok {
			var v *sas.ValidationError
			assert.ErrorAs(t, err, &v, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}

func TestCheckIDs(t *testing.T) {
	t.Parallel()
	require.NoError(t, sqslimits.CheckIDs(outbound(3, 1)))
	require.NoError(t, sqslimits.CheckIDs(nil))
	var v *sas.ValidationError
	require.ErrorAs(t, sqslimits.CheckIDs([]sas.OutboundMessage{{ID: "a"}, {}}), &v)
	assert.Equal(t, "Messages[1].ID", v.Field)
	require.ErrorAs(t, sqslimits.CheckIDs([]sas.OutboundMessage{{ID: "a"}, {ID: "b"}, {ID: "a"}}), &v)
	assert.Equal(t, "Messages[2].ID", v.Field)
}

func TestCheckSend(t *testing.T) {
	t.Parallel()
	valid, failed, err := sqslimits.CheckSend([]sas.OutboundMessage{{ID: "a", Body: "x"}, {ID: "b"}, {ID: "c", Body: "y"}})
	require.NoError(t, err)
	assert.Equal(t, []sas.OutboundMessage{{ID: "a", Body: "x"}, {ID: "c", Body: "y"}}, valid)
	require.Len(t, failed, 1)
	assert.Equal(t, "b", failed[0].ID)
	assert.Equal(t, sqslimits.CodeInvalidParameter, failed[0].Code)

	_, _, err = sqslimits.CheckSend([]sas.OutboundMessage{{ID: "a", Body: "x"}, {ID: "a", Body: "y"}})
	var v *sas.ValidationError
	require.ErrorAs(t, err, &v)
}

func TestCheckReceipts(t *testing.T) {
	t.Parallel()
	valid, failed := sqslimits.CheckReceipts([]string{"r1", "", "r2"})
	assert.Equal(t, []string{"r1", "r2"}, valid)
	require.Len(t, failed, 1)
	assert.Equal(t, sqslimits.CodeInvalidReceipt, failed[0].Code)
	assert.True(t, failed[0].SenderFault)
}

func TestCheckReceive(t *testing.T) {
	t.Parallel()
	got, err := sqslimits.CheckReceive(sas.ReceiveParams{Wait: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, sqslimits.Receive{Max: 1, WaitSeconds: 2}, got, "Max 0 means 1; seconds round up")
	got, err = sqslimits.CheckReceive(sas.ReceiveParams{Max: 10, Wait: sqslimits.MaxWait, Visibility: sqslimits.MaxVisibility})
	require.NoError(t, err)
	assert.Equal(t, sqslimits.Receive{Max: 10, WaitSeconds: 20, VisibilitySeconds: 12 * 3600}, got)
	for _, p := range []sas.ReceiveParams{
		{Max: 11},
		{Max: -1},
		{Wait: sqslimits.MaxWait + time.Millisecond},
		{Visibility: -time.Second},
	} {
		var v *sas.ValidationError
		_, err := sqslimits.CheckReceive(p)
		assert.ErrorAs(t, err, &v, "%+v", p)
	}
}

// The limits add up: the largest message about an order (the largest
// payload intake takes plus the largest envelope) is one SQS accepts. The
// compiler checks the same sum; this says the figures.
func TestOrderMessagesFitAQueueMessage(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 64<<10, sas.MaxPayloadBytes)
	assert.Equal(t, 4096+1024+6000+16<<10, sqslimits.MaxEnvelopeOverheadBytes)
	assert.Equal(t, 64<<10, sas.MaxOrderResultsBytes)
	assert.Equal(t, 158576, sqslimits.MaxOrderMessageBytes)
	assert.LessOrEqual(t, sqslimits.MaxOrderMessageBytes, sqslimits.MaxBodyBytes)
	assert.Nil(t, sqslimits.CheckMessage(sas.OutboundMessage{Body: strings.Repeat("<", sqslimits.MaxOrderMessageBytes)}))
}

// The construct (infra/sascdk, in a module of its own) sets its
// queues' MaximumMessageSize to the same limit.
func TestStackConfiguresTheSameLimit(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "infra", "sascdk", "storage.go"))
	require.NoError(t, err)
	m := regexp.MustCompile(`const queueMaxMessageBytes = (\d+) \* 1024`).FindSubmatch(src)
	require.NotNil(t, m, "infra/sascdk/storage.go no longer declares queueMaxMessageBytes")
	kib, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	assert.Equal(t, sqslimits.MaxBodyBytes, kib*1024)
}
