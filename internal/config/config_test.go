package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, 8, c.IndexShards)
	require.Equal(t, 3, c.MaxFailures)
	require.Equal(t, 30*time.Second, c.StepTimeout)
	require.Equal(t, time.Minute, c.PickupTimeout)
	require.Zero(t, c.WaitLimit, "unset: the supervisor's own default applies")
}

// Signed replies are required unless the deployment says otherwise (for
// agents built before signatures, docs/trust.md).
func TestLoadRequireSignedReplies(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": true, "true": true, "1": true, "false": false, "0": false} {
		c, err := Load(env(map[string]string{"SAS_REQUIRE_SIGNED_REPLIES": v}))
		require.NoError(t, err, v)
		require.Equal(t, want, c.RequireSignedReplies, "SAS_REQUIRE_SIGNED_REPLIES=%q", v)
	}
	_, err := Load(env(map[string]string{"SAS_REQUIRE_SIGNED_REPLIES": "maybe"}))
	require.ErrorContains(t, err, "SAS_REQUIRE_SIGNED_REPLIES")
}

func TestLoadWaitLimit(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"SAS_WAIT_LIMIT": "20m"}))
	require.NoError(t, err)
	require.Equal(t, 20*time.Minute, c.WaitLimit)
	for _, v := range []string{"soon", "0", "-1m", "10"} {
		_, err = Load(env(map[string]string{"SAS_WAIT_LIMIT": v}))
		require.ErrorContains(t, err, "SAS_WAIT_LIMIT", v)
	}
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	_, err := Load(env(map[string]string{"SAS_STEP_TIMEOUT": "soon"}))
	require.ErrorContains(t, err, "SAS_STEP_TIMEOUT")
	_, err = Load(env(map[string]string{"SAS_MAX_FAILURES": "-1"}))
	require.ErrorContains(t, err, "SAS_MAX_FAILURES")
	require.ErrorContains(t, Require(env(nil), "SAS_STATE_TABLE", "SAS_ORDERS_TABLE"), "SAS_STATE_TABLE, SAS_ORDERS_TABLE")
}

func TestReplyToAllowed(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"SAS_ALLOWED_REPLY_QUEUES": "http://q/1/exact, http://q/1/team-*"}))
	require.NoError(t, err)
	require.True(t, c.ReplyToAllowed("http://q/1/exact"))
	require.False(t, c.ReplyToAllowed("http://q/1/exact2"))
	require.True(t, c.ReplyToAllowed("http://q/1/team-a"))
	require.False(t, c.ReplyToAllowed("http://q/2/team-a"))
	require.False(t, c.ReplyToAllowed(""))
	require.False(t, c.ReplyToAllowed("http://q/1/team-a/../../2/x"), "a prefix allows queue names, not paths")
	require.False(t, c.ReplyToAllowed("http://q/1/team-a?QueueUrl=x"))
	require.True(t, c.ReplyToAllowed("http://q/1/team-a.fifo"))
}

// The allow-list holds AWS URLs (the construct makes them from ARNs); an
// emulator's own URLs for the same queues pass only when the SDK is pointed
// at that emulator, and never at another host.
func TestReplyToAllowedAtTheEmulator(t *testing.T) {
	t.Parallel()
	allowed := "https://sqs.us-east-1.amazonaws.com/000000000000/my-replies,https://sqs.us-east-1.amazonaws.com/000000000000/tenant-*"
	cases := []struct {
		name, endpoint, url string
		want                bool
	}{
		{"AWS URL, no endpoint", "", "https://sqs.us-east-1.amazonaws.com/000000000000/my-replies", true},
		{"on AWS the emulator's URL is refused", "", "http://127.0.0.1:4566/000000000000/my-replies", false},
		{"on AWS another host is refused", "", "https://evil.example.com/000000000000/my-replies", false},
		{"at the endpoint", "http://127.0.0.1:4566", "http://127.0.0.1:4566/000000000000/my-replies", true},
		{"AWS URL still passes at an emulator", "http://127.0.0.1:4566", "https://sqs.us-east-1.amazonaws.com/000000000000/my-replies", true},
		{"localhost for 127.0.0.1", "http://127.0.0.1:4566", "http://localhost:4566/000000000000/my-replies", true},
		{"127.0.0.1 for localhost, endpoint with slash", "http://localhost:4566/", "http://127.0.0.1:4566/000000000000/my-replies", true},
		{"[::1] for 127.0.0.1", "http://127.0.0.1:4566", "http://[::1]:4566/000000000000/my-replies", true},
		{"prefix at the endpoint", "http://127.0.0.1:4566", "http://127.0.0.1:4566/000000000000/tenant-a", true},
		{"prefix allows names only", "http://127.0.0.1:4566", "http://127.0.0.1:4566/000000000000/tenant-a/x", false},
		{"other port", "http://127.0.0.1:4566", "http://127.0.0.1:4567/000000000000/my-replies", false},
		{"other scheme", "http://127.0.0.1:4566", "https://127.0.0.1:4566/000000000000/my-replies", false},
		{"other host with an allowed account and name", "http://127.0.0.1:4566", "http://evil.example.com:4566/000000000000/my-replies", false},
		{"other account", "http://127.0.0.1:4566", "http://127.0.0.1:4566/111122223333/my-replies", false},
		{"other name", "http://127.0.0.1:4566", "http://127.0.0.1:4566/000000000000/my-replies-2", false},
		{"no account", "http://127.0.0.1:4566", "http://127.0.0.1:4566/my-replies", false},
		{"not a URL", "http://127.0.0.1:4566", "my-replies", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(env(map[string]string{"SAS_ALLOWED_REPLY_QUEUES": allowed, "AWS_ENDPOINT_URL": tc.endpoint}))
			require.NoError(t, err)
			require.Equal(t, tc.want, c.ReplyToAllowed(tc.url), "replyTo %s with endpoint %q", tc.url, tc.endpoint)
		})
	}
}

func TestSQSEndpointPrefersTheSQSVariable(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:2"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:2", c.SQSEndpoint)
	c, err = Load(env(map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1", c.SQSEndpoint)
}

func TestLoadAgentQueues(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{
		"SAS_AGENT_QUEUE_URL": "http://q/1/default",
		"SAS_AGENT_QUEUES":    `{"flights": {"url": "http://q/1/flights", "priorityUrl": "http://q/1/flights-hi"}, "hotels": {"url": "http://q/1/hotels"}}`,
	}))
	require.NoError(t, err)
	q := c.AgentQueues
	require.Equal(t, "http://q/1/flights", q.URL("flights", 0))
	require.Equal(t, "http://q/1/flights", q.URL("flights", 4))
	require.Equal(t, "http://q/1/flights-hi", q.URL("flights", 5), "priority 5 and up take the lane")
	require.Equal(t, "http://q/1/hotels", q.URL("hotels", 9), "no lane: the agent's queue")
	require.Equal(t, "http://q/1/default", q.URL("cars", 0), "an agent not listed: SAS_AGENT_QUEUE_URL")
	require.Equal(t, []string{"http://q/1/default", "http://q/1/flights", "http://q/1/flights-hi", "http://q/1/hotels"}, q.All())

	for _, bad := range []string{`[]`, `{"flights": "http://q"}`, `{"flights": {}}`, `{"flights": {"url": "x", "lane": "y"}}`} {
		_, err := Load(env(map[string]string{"SAS_AGENT_QUEUES": bad}))
		require.ErrorContains(t, err, "SAS_AGENT_QUEUES", bad)
	}
}

// The allow-list takes no account-wide wildcard, and never the
// deployment's own queues, whatever it lists (docs/trust.md).
func TestReplyToNeverTheDeploymentsOwnQueues(t *testing.T) {
	t.Parallel()
	_, err := Load(env(map[string]string{"SAS_ALLOWED_REPLY_QUEUES": "https://sqs.eu-west-1.amazonaws.com/111122223333/*"}))
	require.ErrorContains(t, err, "every queue of the account")
	c, err := Load(env(map[string]string{
		"SAS_ALLOWED_REPLY_QUEUES": "https://sqs.eu-west-1.amazonaws.com/111122223333/sas-*",
		"SAS_INTAKE_QUEUE_URL":     "https://sqs.eu-west-1.amazonaws.com/111122223333/sas-intake",
		"SAS_SCHEDULER_QUEUE_URL":  "https://sqs.eu-west-1.amazonaws.com/111122223333/sas-scheduler",
		"SAS_CONTROL_QUEUE_URL":    "https://sqs.eu-west-1.amazonaws.com/111122223333/sas-control",
		"SAS_AGENT_QUEUES":         `{"payments":{"url":"https://sqs.eu-west-1.amazonaws.com/111122223333/sas-payments"}}`,
	}))
	require.NoError(t, err)
	require.True(t, c.ReplyToAllowed("https://sqs.eu-west-1.amazonaws.com/111122223333/sas-status"))
	for _, own := range []string{"sas-intake", "sas-scheduler", "sas-control", "sas-payments"} {
		require.False(t, c.ReplyToAllowed("https://sqs.eu-west-1.amazonaws.com/111122223333/"+own), own)
	}
}

// A Config built in code is not checked by Load: an account-wide entry in
// it still allows nothing (issue 29, F-15).
func TestAccountWideEntryAllowsNothingInACodeBuiltConfig(t *testing.T) {
	t.Parallel()
	c := Config{AllowedReplyQueues: []string{"https://sqs.eu-west-1.amazonaws.com/111122223333/*", "*", "https://sqs.eu-west-1.amazonaws.com/111122223333/tenant-*"}}
	require.False(t, c.ReplyToAllowed("https://sqs.eu-west-1.amazonaws.com/111122223333/anything"))
	require.True(t, c.ReplyToAllowed("https://sqs.eu-west-1.amazonaws.com/111122223333/tenant-a"), "the named prefix still allows its queues")
	c.SQSEndpoint = "http://127.0.0.1:4566"
	require.False(t, c.ReplyToAllowed("http://127.0.0.1:4566/111122223333/anything"), "nor at the emulator")
}

func TestLoadSchedules(t *testing.T) {
	t.Parallel()
	c, err := Load(env(map[string]string{"SAS_SCHEDULES": `{"nightly": {"overlap": "skip", "senders": ["AROASCHED"]}, "hourly": {}}`}))
	require.NoError(t, err)
	require.Equal(t, map[string]sas.ScheduleConfig{"nightly": {Overlap: sas.OverlapSkip, Senders: []string{"AROASCHED"}}, "hourly": {}}, c.Schedules)
	for v, want := range map[string]string{
		`{"nightly": {"overlap": "buffer"}}`: `overlap "buffer": want allow or skip`,
		`{"night ly": {}}`:                   `"night ly" is not a schedule name`,
		`{"nightly": {"cron": "x"}}`:         `unknown field "cron"`,
		`[]`:                                 "want a JSON object",
	} {
		_, err := Load(env(map[string]string{"SAS_SCHEDULES": v}))
		require.ErrorContains(t, err, "SAS_SCHEDULES", v)
		require.ErrorContains(t, err, want, v)
	}
}

func TestLoadTenants(t *testing.T) {
	t.Parallel()
	const acmeQ, globalQ = "https://sqs.eu-west-1.amazonaws.com/123456789012/acme-status", "https://sqs.eu-west-1.amazonaws.com/123456789012/callers"
	c, err := Load(env(map[string]string{
		"SAS_ALLOWED_REPLY_QUEUES": globalQ + "," + acmeQ,
		"SAS_TENANTS":              `{"acme": {"senders": ["AROAACME"], "replyTo": ["` + acmeQ + `"]}, "globex": {"senders": ["AIDAGLOBEX"]}}`,
	}))
	require.NoError(t, err)
	require.Equal(t, sas.Tenants{"acme": {Senders: []string{"AROAACME"}, ReplyTo: []string{acmeQ}}, "globex": {Senders: []string{"AIDAGLOBEX"}}}, c.Tenants)
	require.True(t, c.SubmitterReplyTo("AROAACME", acmeQ))
	require.False(t, c.SubmitterReplyTo("AROAACME", globalQ), "a tenant names its own queues, not the deployment's")
	require.False(t, c.SubmitterReplyTo("AIDAGLOBEX", acmeQ), "nor another tenant's")
	require.False(t, c.SubmitterReplyTo("AROAOTHER", acmeQ), "and no outsider names a tenant's, though the deployment's list does")
	require.True(t, c.SubmitterReplyTo("AROAOTHER", globalQ))
	require.True(t, c.ReplyToAllowed(acmeQ), "statuses may be posted to a tenant's queue")
	for v, want := range map[string]string{
		`{"Acme": {"senders": ["AROAA"]}}`:                           `tenant "Acme": a name is`,
		`{"acme": {}}`:                                               "names no sender",
		`{"acme": {"senders": ["AROAA:session"]}}`:                   "is not a principal's unique id",
		`{"a": {"senders": ["AROAA"]}, "b": {"senders": ["AROAA"]}}`: "is tenant a's already",
		`{"acme": {"senders": ["AROAA"], "replyTo": ["*"]}}`:         "allows every queue of the account",
		`{"acme": {"senders": ["AROAA"], "queues": []}}`:             `unknown field "queues"`,
	} {
		_, err := Load(env(map[string]string{"SAS_TENANTS": v}))
		require.ErrorContains(t, err, "SAS_TENANTS", v)
		require.ErrorContains(t, err, want, v)
	}
}
