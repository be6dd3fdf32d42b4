package scheduler_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// What senders write, checked where it is used (issue 29, §2 and §3).

// The deployment's own queues are never a replyTo, whatever the allow-list
// function of a Config built in code says (F-15).
func TestReplyToNeverOwnQueueWhateverTheFunctionSays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	svc := f.newServiceConfig("s-own", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.ReplyToAllowed = func(u string) bool { return u == f.replyURL || u == controlQueueURL || u == f.agentURL }
	})
	h := scheduler.NewHandler(svc)
	for _, own := range []string{controlQueueURL, f.agentURL} {
		f.handleWith(h, f.event(intake("o-own", "payment", own)))
		f.requireNoOrder("o-own")
	}
	require.Empty(t, f.requests(), "nothing reached the agent queue: no request, no status")
	f.handleWith(h, f.event(intake("o-fine", "payment", f.replyURL)))
	require.Len(t, f.statuses(), 1, "an allowed queue still gets its status")
}

// A replyTo given as the allowed queue's ARN, the form the deployment's
// allow-list is written in, is that queue: the order keeps its URL (§3).
func TestReplyToAsTheAllowedQueuesARN(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const arn, url = "arn:aws:sqs:eu-west-1:123456789012:callers", "https://sqs.eu-west-1.amazonaws.com/123456789012/callers"
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	svc := f.newServiceConfig("s-arn", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.ReplyToAllowed = func(u string) bool { return u == url }
	})
	h := scheduler.NewHandler(svc)
	f.handleWith(h, f.event(intake("o-arn", "payment", arn)))
	require.Equal(t, url, f.view("o-arn").Order.ReplyTo)
	require.Len(t, f.requests(), 1)
	f.handleWith(h, f.event(intake("o-url", "payment", url)))
	require.Equal(t, url, f.view("o-url").Order.ReplyTo, "the URL is taken as before")

	f.handleWith(h, f.event(intake("o-badarn", "payment", "arn:aws:sns:eu-west-1:123456789012:callers")))
	f.requireNoOrder("o-badarn")
}

// Every logged copy of what a sender wrote is bounded, not only the status
// reason: a 10,000-character workflow name made a 10 KB log line (§3).
func TestLogLinesAreBoundedWhateverTheSenderWrote(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var buf bytes.Buffer
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	svc := f.newServiceConfig("s-log", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	h := scheduler.NewHandler(svc)
	long := strings.Repeat("w", 10_000)
	f.handleWith(h, f.event(
		`{"orderId":"o-long","workflow":"`+long+`","replyTo":"`+f.replyURL+`"}`,
		`{"v":1,"kind":"`+long+`"}`,
	))
	ev := f.event(sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: "o-none", Actor: long}))
	f.handleWith(h, ev)
	st := f.statuses()
	require.Len(t, st, 1)
	require.Equal(t, sas.StatusRejected, st[0].Status)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.Less(t, len(l), 3*sas.MaxReasonBytes, "a log line of %d bytes: %.200s…", len(l), l)
	}
}

// An order id is its submitter's (F-4): another sender reusing it hears
// nothing about the order, and the order's own replyTo hears nothing from
// it: no "rejected" for a running order, no "received" again, no request
// re-sent. The submitter is the SenderId's principal, so the owner's other
// instances (other session names) are the owner.
func TestAnOrderIDIsItsSubmitters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	from := func(sender string, bodies ...string) {
		t.Helper()
		ev := f.event(bodies...)
		for i := range ev.Records {
			ev.Records[i].Attributes = map[string]string{"SenderId": sender}
		}
		require.Empty(t, f.handle(ev))
	}
	const owner, ownerAgain, other = "AROAOWNER:i-0abc", "AROAOWNER:i-0def", "AROAEVIL:mallory"
	body := intake("o-mine", "payment", f.replyURL)
	from(owner, body)
	require.Len(t, f.requests(), 1)
	require.Len(t, f.statuses(), 1)
	require.Equal(t, "AROAOWNER", f.view("o-mine").Order.Submitter)

	conflicting := `{"orderId":"o-mine","workflow":"payment","payload":{"amount":1},"replyTo":"` + f.replyURL + `"}`
	from(other, conflicting)
	from(other, body)
	require.Empty(t, f.statuses(), "the owner's queue hears nothing from another sender")
	require.Empty(t, f.requests(), "another sender's duplicate re-sends nothing")
	require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(f.view("o-mine").Order.Payload))

	from(other, `{"orderId":"o-mine","workflow":"payment","payload":{"amount":1},"replyTo":"`+f.otherURL+`"}`)
	st := f.statusesAt(f.otherURL)
	require.Len(t, st, 1, "a conflict is still told to the sender's own queue")
	require.Equal(t, sas.StatusRejected, st[0].Status)

	from(ownerAgain, body)
	require.Len(t, f.requests(), 1, "the owner's redelivery from another instance re-sends the live request")
	require.Equal(t, []string{"received#1000"}, statusList(f.statuses()))
	from(ownerAgain, conflicting)
	st = f.statuses()
	require.Len(t, st, 1, "the owner is told of its own conflict")
	require.Equal(t, sas.StatusRejected, st[0].Status)
}

// A tenant's submitters use its order ids and its replyTo queues only, and
// no other submitter uses either: an id is refused on its prefix alone,
// before any read, so an outsider is told the same whether the tenant's
// order exists or not (docs/trust.md, "Tenants"; issue 29, F-4).
func TestTenantsKeepTheirIDsAndQueues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const acme, outsider = "AROAACME:i-0abc", "AROAEVIL:mallory"
	cfg := config.Config{
		AllowedReplyQueues: []string{f.replyURL, f.otherURL},
		Tenants:            sas.Tenants{"acme": {Senders: []string{"AROAACME"}, ReplyTo: []string{f.otherURL}}},
	}
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	svc := f.newServiceConfig("s-tenants", reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
		c.ReplyToAllowed, c.SubmitterReplyTo, c.Tenants = cfg.ReplyToAllowed, cfg.SubmitterReplyTo, cfg.Tenants
	})
	h := scheduler.NewHandler(svc)
	from := func(sender, body string) {
		t.Helper()
		ev := f.event(body)
		if sender != "" {
			ev.Records[0].Attributes = map[string]string{"SenderId": sender}
		}
		f.handleWith(h, ev)
	}
	rejected := func(url string) string {
		t.Helper()
		st := f.statusesAt(url)
		require.Len(t, st, 1)
		require.Equal(t, sas.StatusRejected, st[0].Status)
		return st[0].Reason
	}

	from(acme, intake("acme:o-1", "payment", f.otherURL))
	require.Equal(t, "AROAACME", f.view("acme:o-1").Order.Submitter)
	require.Equal(t, []string{"received#1000"}, statusList(f.statusesAt(f.otherURL)))
	require.Len(t, f.requests(), 1)

	from(acme, intake("o-2", "payment", f.otherURL))
	f.requireNoOrder("o-2")
	require.Contains(t, rejected(f.otherURL), `start with "acme:"`)

	from(acme, intake("acme:o-3", "payment", f.replyURL))
	f.requireNoOrder("acme:o-3")
	require.Empty(t, f.statuses(), "a tenant's submitter names its own queues only, and hears nothing on another")

	from(outsider, intake("acme:o-1", "payment", f.replyURL))
	taken := rejected(f.replyURL)
	from(outsider, intake("acme:o-9", "payment", f.replyURL))
	free := rejected(f.replyURL)
	f.requireNoOrder("acme:o-9")
	require.Equal(t, strings.ReplaceAll(taken, "o-1", "o-9"), free, "an outsider learns nothing of which of the tenant's ids exist")
	require.Empty(t, f.statusesAt(f.otherURL), "the tenant's queue hears nothing of an outsider")
	require.Empty(t, f.requests(), "nothing is re-sent for the tenant's order")

	from(outsider, intake("o-5", "payment", f.otherURL))
	f.requireNoOrder("o-5")
	require.Empty(t, f.statusesAt(f.otherURL), "a tenant's queue is no outsider's replyTo, though the deployment's list names it")

	from(outsider, intake("o-6", "payment", f.replyURL))
	require.Equal(t, []string{"received#1000"}, statusList(f.statusesAt(f.replyURL)), "an outsider submits as before, outside the tenants' ids")
	f.requests()

	from("", intake("acme:o-7", "payment", f.replyURL))
	f.requireNoOrder("acme:o-7")
	require.Contains(t, rejected(f.replyURL), "tenant acme's", "where SQS names no sender, no sender is a tenant's")
}
