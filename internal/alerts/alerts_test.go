package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/sas"
)

var at = time.Date(2026, 11, 5, 10, 30, 0, 0, time.UTC)

func sample() sas.Alert {
	return sas.Alert{
		OrderID: "o-42", Step: 1, StepName: "charge", State: sas.Error,
		Reason: "attempt 3 not finished by its deadline", Attempts: 3, Failures: 3,
		At: at, Source: "supervisor", ID: "o-42/1/Error/3",
	}
}

func decodeBody(t *testing.T, s string) alerts.Body {
	t.Helper()
	var b alerts.Body
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&b))
	return b
}

func TestBody(t *testing.T) {
	t.Parallel()
	b := decodeBody(t, alerts.NewBody(sample()).JSON())
	require.Equal(t, alerts.Body{
		V: 1, Summary: "SAS: order o-42 step 1 (charge) is Error after 3 failures",
		OrderID: "o-42", Step: 1, StepName: "charge", State: sas.Error,
		Reason: "attempt 3 not finished by its deadline", Attempts: 3, Failures: 3,
		Time: at, Source: "supervisor", Inspect: "sasctl show o-42", ID: "o-42/1/Error/3",
	}, b)

	// The wire names are the contract subscribers read.
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(alerts.NewBody(sample()).JSON()), &raw))
	for _, k := range []string{"v", "summary", "orderId", "step", "stepName", "state", "reason", "attempts", "failures", "time", "source", "inspect", "id"} {
		require.Contains(t, raw, k)
	}
}

func TestSubjectFitsSNS(t *testing.T) {
	t.Parallel()
	a := sample()
	a.OrderID = strings.Repeat("x", 128)
	a.StepName = "naïve\nstep"
	s := alerts.Subject(a)
	require.Less(t, len(s), 100)
	require.True(t, strings.HasSuffix(s, "..."))
	for _, r := range s {
		require.True(t, r >= 0x20 && r <= 0x7e, "subject has %q", r)
	}
}

func TestLongReasonIsTruncated(t *testing.T) {
	t.Parallel()
	a := sample()
	a.Reason = strings.Repeat("é", 10_000)
	b := alerts.NewBody(a)
	require.LessOrEqual(t, len(b.Reason), 4<<10)
	require.True(t, strings.HasSuffix(b.Reason, "[truncated]"))
	require.True(t, json.Valid([]byte(b.JSON())))
}

func TestInspectCommandQuotes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "sasctl show o-1:a.b_c", alerts.InspectCommand("o-1:a.b_c"))
	require.Equal(t, `sasctl show 'it'\''s; rm -rf /'`, alerts.InspectCommand("it's; rm -rf /"))
}

type fakeSNS struct {
	in  []*sns.PublishInput
	err error
}

func (f *fakeSNS) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	f.in = append(f.in, in)
	if f.err != nil {
		return nil, f.err
	}
	return &sns.PublishOutput{MessageId: aws.String("m-1")}, nil
}

func TestSNSRequest(t *testing.T) {
	t.Parallel()
	api := &fakeSNS{}
	a, err := alerts.NewSNS(api, "arn:aws:sns:eu-west-1:123456789012:sas-alerts")
	require.NoError(t, err)
	require.NoError(t, a.Alert(t.Context(), sample()))
	require.Len(t, api.in, 1)
	in := api.in[0]
	require.Equal(t, "arn:aws:sns:eu-west-1:123456789012:sas-alerts", aws.ToString(in.TopicArn))
	require.Equal(t, "SAS: order o-42 step 1 (charge) is Error after 3 failures", aws.ToString(in.Subject))
	b := decodeBody(t, aws.ToString(in.Message))
	require.Equal(t, "o-42", b.OrderID)
	require.Equal(t, "sasctl show o-42", b.Inspect)
	require.Equal(t, "o-42", aws.ToString(in.MessageAttributes["orderId"].StringValue))
	require.Equal(t, "Error", aws.ToString(in.MessageAttributes["state"].StringValue))
	require.Equal(t, "Number", aws.ToString(in.MessageAttributes["step"].DataType))
	require.Equal(t, "1", aws.ToString(in.MessageAttributes["step"].StringValue))
	require.Equal(t, "o-42/1/Error/3", aws.ToString(in.MessageAttributes["alertId"].StringValue), "a re-sent alert is recognisable")
	for name, v := range in.MessageAttributes {
		require.NotEmpty(t, aws.ToString(v.StringValue), "attribute %s", name)
	}
	require.Nil(t, in.TargetArn)
	require.Nil(t, in.MessageStructure, "a plain message, the same for every protocol")

	api.err = errors.New("throttled")
	err = a.Alert(t.Context(), sample())
	require.ErrorContains(t, err, "order o-42 step 1")
	require.ErrorContains(t, err, "throttled")
}

func TestNewSNSChecks(t *testing.T) {
	t.Parallel()
	_, err := alerts.NewSNS(&fakeSNS{}, "")
	require.ErrorIs(t, err, sas.ErrInvalid)
	_, err = alerts.NewSNS(nil, "arn:aws:sns:eu-west-1:123456789012:t")
	require.ErrorIs(t, err, sas.ErrInvalid)
}

type fakeEventBridge struct {
	in  []*eventbridge.PutEventsInput
	out *eventbridge.PutEventsOutput
	err error
}

func (f *fakeEventBridge) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.in = append(f.in, in)
	if f.err != nil {
		return nil, f.err
	}
	if f.out != nil {
		return f.out, nil
	}
	return &eventbridge.PutEventsOutput{Entries: []ebtypes.PutEventsResultEntry{{EventId: aws.String("e-1")}}}, nil
}

func TestEventBridgeRequest(t *testing.T) {
	t.Parallel()
	api := &fakeEventBridge{}
	a, err := alerts.NewEventBridge(api, "default")
	require.NoError(t, err)
	require.NoError(t, a.Alert(t.Context(), sample()))
	require.Len(t, api.in, 1)
	require.Len(t, api.in[0].Entries, 1)
	e := api.in[0].Entries[0]
	require.Equal(t, "default", aws.ToString(e.EventBusName))
	require.Equal(t, "sas", aws.ToString(e.Source))
	require.Equal(t, "OrderStepNeedsOperator", aws.ToString(e.DetailType))
	require.Equal(t, at, aws.ToTime(e.Time))
	b := decodeBody(t, aws.ToString(e.Detail))
	require.Equal(t, sas.Error, b.State)
	require.Equal(t, 3, b.Failures)
	require.Equal(t, "sasctl show o-42", b.Inspect)
	require.Equal(t, "o-42/1/Error/3", b.ID, "a re-sent alert is recognisable")
}

func TestEventBridgeRefusedEntryIsAnError(t *testing.T) {
	t.Parallel()
	api := &fakeEventBridge{out: &eventbridge.PutEventsOutput{
		FailedEntryCount: 1,
		Entries:          []ebtypes.PutEventsResultEntry{{ErrorCode: aws.String("ThrottlingException"), ErrorMessage: aws.String("slow down")}},
	}}
	a, err := alerts.NewEventBridge(api, "ops-bus")
	require.NoError(t, err)
	err = a.Alert(t.Context(), sample())
	require.ErrorContains(t, err, "ThrottlingException")
	require.ErrorContains(t, err, "ops-bus")

	api.out, api.err = nil, errors.New("no route to host")
	require.ErrorContains(t, a.Alert(t.Context(), sample()), "no route to host")
}

func TestLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := alerts.NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	require.NoError(t, l.Alert(t.Context(), sample()))
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "ERROR", line["level"])
	require.Equal(t, "o-42", line["order"])
	require.Equal(t, "Error", line["state"])
	require.Equal(t, "sasctl show o-42", line["inspect"])
	require.Contains(t, line["msg"], "order o-42 step 1")
}

// hanging blocks until its context ends; signal reports that it was called.
type hanging struct{ entered chan struct{} }

func (h hanging) Alert(ctx context.Context, _ sas.Alert) error {
	close(h.entered)
	<-ctx.Done()
	return ctx.Err()
}

type signal struct{ called chan struct{} }

func (s signal) Alert(context.Context, sas.Alert) error {
	close(s.called)
	return nil
}

func TestMultiFansOutAndJoinsErrors(t *testing.T) {
	t.Parallel()
	ok1, ok2, bad := alerts.NewRecorder(), alerts.NewRecorder(), alerts.NewRecorder()
	boom := errors.New("topic gone")
	bad.FailWith(func(sas.Alert) error { return boom })
	m := alerts.NewMulti(ok1, nil, bad, ok2)

	err := m.Alert(t.Context(), sample())
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "alerter 2 of 3")
	require.Len(t, ok1.Alerts(), 1, "the alerters before the failing one got it")
	require.Len(t, ok2.Alerts(), 1, "and so did the ones after")
	require.Empty(t, bad.Alerts())

	bad.FailWith(nil)
	require.NoError(t, m.Alert(t.Context(), sample()))
	require.NoError(t, alerts.NewMulti().Alert(t.Context(), sample()), "no alerters: nothing to fail")
}

func TestMultiDoesNotWaitForAHangingAlerterToTellTheOthers(t *testing.T) {
	t.Parallel()
	h := hanging{entered: make(chan struct{})}
	s := signal{called: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- alerts.NewMulti(h, s).Alert(ctx, sample()) }()
	// Both are reached while the first still hangs: had Multi called them in
	// turn, the second would wait for the cancel below.
	<-h.entered
	<-s.called
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	r := alerts.NewRecorder()
	// Twenty at once; each goroutine's error is checked here, on the test's
	// own goroutine (require stops only the goroutine it is called from).
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := sample()
			a.Step = i
			errs[i] = r.Alert(t.Context(), a)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "alert %d", i)
	}
	steps := make([]int, 0, len(errs))
	for _, a := range r.Alerts() {
		steps = append(steps, a.Step)
	}
	require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, steps, "every alert recorded once")
	got := r.Alerts()
	got[0].OrderID = "changed"
	require.Equal(t, "o-42", r.Alerts()[0].OrderID, "Alerts returns a copy")
	r.Reset()
	require.Empty(t, r.Alerts())
}
