// Package config reads the deployment's configuration from environment
// variables: the same names locally and in Lambda (docs/state-store.md).
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Config is everything the functions and tools read from the environment.
type Config struct {
	OrdersTable, StateTable string
	IndexShards             int
	IntakeQueueURL          string
	SchedulerQueueURL       string
	// ControlQueueURL is SAS_CONTROL_QUEUE_URL: the queue only the
	// supervisor and operators may send to, for retries and compensations
	// (docs/trust.md).
	ControlQueueURL string
	// SigningKeySecret is SAS_SIGNING_KEY_SECRET: the Secrets Manager
	// secret (ARN or name) holding the key the scheduler signs its agent
	// requests with, readable by the scheduler's role alone. SigningKey is
	// SAS_SIGNING_KEY, the key itself (base64), for local runs only: a
	// function's environment is readable by whoever may read its
	// configuration.
	SigningKeySecret, SigningKey string
	// SigningKeyMaxAge is SAS_SIGNING_KEY_MAX_AGE: how long the scheduler
	// uses the keys it read from the secret before it reads them again, so
	// that a rotation or a revocation reaches every warm instance within it.
	// 0 (unset) is sas.DefaultKeyMaxAge.
	SigningKeyMaxAge time.Duration
	// RequireSignedReplies is SAS_REQUIRE_SIGNED_REPLIES, true unless it
	// says false: replies without a signature are dropped instead of
	// handled from the store. Every agent built with the SDK echoes the
	// signature; false is for agents built before it (docs/trust.md).
	RequireSignedReplies bool
	AgentQueueURL        string
	// AgentQueues is SAS_AGENT_QUEUES, a JSON object from agent name to
	// its queues, {"payments": {"url": "…", "priorityUrl": "…"}}, with
	// SAS_AGENT_QUEUE_URL as the queue of any agent not listed
	// (docs/agents.md). The scheduler sends there; the supervisor watches
	// them all.
	AgentQueues sas.AgentQueues
	// AgentPriorityQueueURL is SAS_AGENT_PRIORITY_QUEUE_URL: an agent
	// function's own priority lane, beside SAS_AGENT_QUEUE_URL.
	AgentPriorityQueueURL string
	AllowedReplyQueues    []string // an entry ending in * is a prefix
	// SQSEndpoint is the endpoint the SDK sends SQS calls to instead of
	// AWS (AWS_ENDPOINT_URL_SQS, else AWS_ENDPOINT_URL): an emulator's.
	// Empty on AWS. ReplyToAllowed accepts the allowed queues' URLs at it.
	SQSEndpoint   string
	AlertTopicARN string
	EventBusName  string
	MaxFailures   int
	StepTimeout   time.Duration
	PickupTimeout time.Duration
	// WaitLimit is SAS_WAIT_LIMIT, read so that a deployment that sets it
	// loads, and no longer used: a held step whose pick-up was not
	// reported waits until its request can no longer be delivered
	// (docs/protocol.md, "Deadlines start at pick-up").
	WaitLimit   time.Duration
	PaymentsURL string
	// WorkflowsFile is SAS_WORKFLOWS_FILE: a workflow file (package
	// workflow) that replaces the reference workflows, and may carry the
	// deployment's agents, queues and limits in its "deployment" section
	// (workflow.Deployment, read by Load). Checked at start-up.
	WorkflowsFile string
	// Schedules is SAS_SCHEDULES, a JSON object from schedule name to
	// what the scheduler knows of it, {"nightly": {"overlap": "skip",
	// "senders": ["AROA…"]}}: the deployment's schedules, whose runs the
	// intake takes (docs/schedules.md). The CDK construct writes it.
	Schedules map[string]sas.ScheduleConfig
	// Tenants is SAS_TENANTS, a JSON object from tenant name to its
	// senders and replyTo queues, {"acme": {"senders": ["AROA…"],
	// "replyTo": ["https://…/acme-status"]}}: submitters that must not reach
	// each other's orders (docs/trust.md, "Tenants"). The CDK construct
	// writes it from Props.Tenants.
	Tenants sas.Tenants
}

// Getenv is os.Getenv; tests pass a map's lookup.
type Getenv func(string) string

// Load reads the configuration. Missing values get defaults; malformed ones
// are errors naming the variable.
func Load(getenv Getenv) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		OrdersTable:           getenv("SAS_ORDERS_TABLE"),
		StateTable:            getenv("SAS_STATE_TABLE"),
		IntakeQueueURL:        getenv("SAS_INTAKE_QUEUE_URL"),
		SchedulerQueueURL:     getenv("SAS_SCHEDULER_QUEUE_URL"),
		ControlQueueURL:       getenv("SAS_CONTROL_QUEUE_URL"),
		SigningKeySecret:      getenv("SAS_SIGNING_KEY_SECRET"),
		SigningKey:            getenv("SAS_SIGNING_KEY"),
		AgentQueueURL:         getenv("SAS_AGENT_QUEUE_URL"),
		AgentPriorityQueueURL: getenv("SAS_AGENT_PRIORITY_QUEUE_URL"),
		AlertTopicARN:         getenv("SAS_ALERT_TOPIC_ARN"),
		EventBusName:          getenv("SAS_EVENT_BUS_NAME"),
		PaymentsURL:           getenv("SAS_PAYMENTS_URL"),
		WorkflowsFile:         getenv("SAS_WORKFLOWS_FILE"),
		SQSEndpoint:           getenv("AWS_ENDPOINT_URL_SQS"),
	}
	if c.SQSEndpoint == "" {
		c.SQSEndpoint = getenv("AWS_ENDPOINT_URL")
	}
	for _, q := range strings.Split(getenv("SAS_ALLOWED_REPLY_QUEUES"), ",") {
		if q = strings.TrimSpace(q); q == "" {
			continue
		}
		if AccountWide(q) {
			return c, fmt.Errorf("SAS_ALLOWED_REPLY_QUEUES: %q allows every queue of the account: name a queue, or a name prefix before the *", q)
		}
		c.AllowedReplyQueues = append(c.AllowedReplyQueues, q)
	}
	c.AgentQueues.Default = c.AgentQueueURL
	if v := strings.TrimSpace(getenv("SAS_AGENT_QUEUES")); v != "" {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c.AgentQueues.ByAgent); err != nil {
			return c, fmt.Errorf("SAS_AGENT_QUEUES: want a JSON object such as {\"payments\": {\"url\": \"https://…\", \"priorityUrl\": \"https://…\"}}: %w", err)
		}
		for name, q := range c.AgentQueues.ByAgent {
			if name == "" || q.URL == "" {
				return c, fmt.Errorf("SAS_AGENT_QUEUES: agent %q needs a \"url\"", name)
			}
		}
	}
	if err := c.readSchedules(getenv("SAS_SCHEDULES")); err != nil {
		return c, err
	}
	if err := c.readTenants(getenv("SAS_TENANTS")); err != nil {
		return c, err
	}
	switch v := strings.TrimSpace(getenv("SAS_REQUIRE_SIGNED_REPLIES")); v {
	case "false", "0":
	case "", "true", "1":
		c.RequireSignedReplies = true
	default:
		return c, fmt.Errorf("SAS_REQUIRE_SIGNED_REPLIES=%q: want true or false", v)
	}
	var err error
	file, err := c.readDeployment()
	if err != nil {
		return c, err
	}
	if c.IndexShards, err = intVar(getenv, "SAS_INDEX_SHARDS", sizing.DefaultIndexShards); err != nil {
		return c, err
	}
	if c.MaxFailures, err = intVar(getenv, "SAS_MAX_FAILURES", sizing.DefaultMaxAttempts); err != nil {
		return c, err
	}
	if c.StepTimeout, err = durVar(getenv, "SAS_STEP_TIMEOUT", sizing.DefaultStepTimeout); err != nil {
		return c, err
	}
	if c.PickupTimeout, err = durVar(getenv, "SAS_PICKUP_TIMEOUT", sizing.DefaultPickupTimeout); err != nil {
		return c, err
	}
	if c.WaitLimit, err = durVar(getenv, "SAS_WAIT_LIMIT", 0); err != nil {
		return c, err
	}
	if c.SigningKeyMaxAge, err = durVar(getenv, "SAS_SIGNING_KEY_MAX_AGE", 0); err != nil {
		return c, err
	}
	if err := c.applyDeployment(getenv, file); err != nil {
		return c, err
	}
	return c, nil
}

// Require fails naming every empty variable among the given ones.
func Require(getenv Getenv, names ...string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	var missing []string
	for _, n := range names {
		if getenv(n) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing configuration: %s", strings.Join(missing, ", "))
	}
	return nil
}

// ReplyToAllowed reports whether a submitter may name url as its replyTo:
// url is an entry of AllowedReplyQueues (an entry ending in * allows every
// queue name that starts with the rest), or, when the SDK talks to an
// emulator (SQSEndpoint), the same queue, account and name, at the
// emulator's address.
//
// Why the second form, and why it is safe. The allow-list holds AWS URLs
// (the CDK construct derives them from the queues' ARNs), but an emulator
// hands out its own: MiniStack's are http://127.0.0.1:4566/000000000000/name
// (or localhost, for queues made by its CloudFormation), and a caller
// naturally passes the URL its CreateQueue returned. The host part of a
// queue URL does not choose where the SDK sends: it sends every call to
// SQSEndpoint, or to AWS when that is empty, and the queue is the URL's
// account and name. So a URL at SQSEndpoint reaches exactly the queue the
// same account and name reach on AWS, and accepting it grants nothing more.
// What is never accepted is an account and name at any other host: on AWS,
// where Lambda sets no endpoint variable, only the exact AWS URLs pass, as
// before, and a replyTo naming some other host (stored with the order, shown
// to operators, perhaps dialled by a future client) is refused.
//
// An account-wide entry (AccountWide) allows nothing, so that a Config
// built in code, which Load has not checked, keeps the rule too.
func (c Config) ReplyToAllowed(url string) bool {
	if c.allowedIn(c.AllowedReplyQueues, url) {
		return true
	}
	for _, t := range c.Tenants {
		if c.allowedIn(t.ReplyTo, url) {
			return true
		}
	}
	return false
}

// SubmitterReplyTo reports whether submitter may name url as its replyTo:
// a tenant's submitter a queue of its tenant's list; any other a queue of
// the deployment's list that no tenant's list names, so that no submitter
// aims statuses at a tenant's queue (docs/trust.md, "Tenants").
func (c Config) SubmitterReplyTo(submitter, url string) bool {
	if _, t, ok := c.Tenants.Of(submitter); ok {
		return c.allowedIn(t.ReplyTo, url)
	}
	for _, t := range c.Tenants {
		if c.allowedIn(t.ReplyTo, url) {
			return false
		}
	}
	return c.allowedIn(c.AllowedReplyQueues, url)
}

// allowedIn is ReplyToAllowed's rule for one allow-list.
func (c Config) allowedIn(list []string, url string) bool {
	if c.ownQueue(url) {
		return false
	}
	for _, a := range list {
		if AccountWide(a) {
			continue
		}
		if queueMatches(a, url) {
			return true
		}
	}
	if c.SQSEndpoint == "" {
		return false
	}
	origin, path, ok := splitQueueURL(url)
	if !ok || !sameOrigin(origin, c.SQSEndpoint) {
		return false
	}
	for _, a := range list {
		if AccountWide(a) {
			continue
		}
		if _, allowed, ok := splitQueueURL(strings.TrimSuffix(a, "*")); ok {
			if strings.HasSuffix(a, "*") {
				allowed += "*"
			}
			if queueMatches(allowed, path) {
				return true
			}
		}
	}
	return false
}

// AccountWide reports whether an allow-list entry allows every queue of an
// account ("…/<account>/*", or "*"): the deployment's own queues included,
// so a submitter could aim statuses at any of them (docs/trust.md). Load
// refuses such an entry and ReplyToAllowed ignores it.
func AccountWide(entry string) bool {
	entry = strings.TrimSpace(entry)
	return entry == "*" || strings.HasSuffix(entry, "/*")
}

// ownQueue reports whether url names one of the deployment's own queues
// (by queue name, whatever the host): statuses posted there would reach
// the scheduler or an agent as if from them (docs/trust.md).
func (c Config) ownQueue(url string) bool {
	name := sas.QueueName(url)
	own := append([]string{c.IntakeQueueURL, c.SchedulerQueueURL, c.ControlQueueURL, c.AgentQueueURL, c.AgentPriorityQueueURL}, c.AgentQueues.All()...)
	for _, q := range own {
		if q != "" && sas.QueueName(q) == name {
			return true
		}
	}
	return false
}

// queueMatches reports whether url is the allowed entry, or, for an entry
// ending in *, starts with the rest and goes on with queue-name characters
// only (a prefix allows names, not paths or queries after them).
func queueMatches(entry, url string) bool {
	p, ok := strings.CutSuffix(entry, "*")
	if !ok {
		return url == entry
	}
	rest, ok := strings.CutPrefix(url, p)
	return ok && strings.IndexFunc(rest, func(r rune) bool { return !queueNameRune(r) }) < 0
}

// queueNameRune is a character SQS allows in a queue name (and the dot of
// the .fifo suffix).
func queueNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}

// splitQueueURL splits scheme://host[:port]/<account>/<name> into its
// origin and "/<account>/<name>".
func splitQueueURL(u string) (origin, path string, ok bool) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || scheme == "" {
		return "", "", false
	}
	host, p, ok := strings.Cut(rest, "/")
	if !ok || host == "" {
		return "", "", false
	}
	account, name, ok := strings.Cut(p, "/")
	if !ok || account == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return scheme + "://" + host, "/" + p, true
}

// sameOrigin compares an origin with an endpoint (which may end in "/"),
// case-insensitively, taking the loopback names localhost, 127.0.0.1 and
// [::1] for one another: MiniStack bound to 127.0.0.1 names the queues its
// CloudFormation creates http://localhost:<port>/…, and all three reach the
// same machine.
func sameOrigin(origin, endpoint string) bool {
	norm := func(s string) string {
		s = strings.ToLower(strings.TrimRight(s, "/"))
		scheme, hostport, _ := strings.Cut(s, "://")
		host, port := hostport, ""
		if i := strings.LastIndex(hostport, ":"); i >= 0 && !strings.HasSuffix(hostport, "]") {
			host, port = hostport[:i], hostport[i:]
		}
		switch host {
		case "localhost", "127.0.0.1", "[::1]":
			host = "loopback"
		}
		return scheme + "://" + host + port
	}
	return norm(origin) == norm(endpoint)
}

func intVar(getenv Getenv, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive integer", name, v)
	}
	return n, nil
}

func durVar(getenv Getenv, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", name, v)
	}
	return d, nil
}

// readSchedules reads SAS_SCHEDULES.
// readTenants reads SAS_TENANTS (Config.Tenants).
func (c *Config) readTenants(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.Tenants); err != nil {
		return fmt.Errorf("SAS_TENANTS: want a JSON object such as {\"acme\": {\"senders\": [\"AROA…\"], \"replyTo\": [\"https://…\"]}}: %w", err)
	}
	if err := c.Tenants.Check(); err != nil {
		return fmt.Errorf("SAS_TENANTS: %w", err)
	}
	for _, name := range c.Tenants.Names() {
		for _, q := range c.Tenants[name].ReplyTo {
			if AccountWide(q) {
				return fmt.Errorf("SAS_TENANTS: tenant %s: replyTo %q allows every queue of the account: name a queue, or a name prefix before the *", name, q)
			}
		}
	}
	return nil
}

func (c *Config) readSchedules(v string) error {
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.Schedules); err != nil {
		return fmt.Errorf("SAS_SCHEDULES: want a JSON object such as {\"nightly\": {\"overlap\": \"skip\"}}: %w", err)
	}
	for name, sc := range c.Schedules {
		switch {
		case !sas.ValidScheduleName(name):
			return fmt.Errorf("SAS_SCHEDULES: %q is not a schedule name (1-64 characters of A-Z a-z 0-9 _ -)", name)
		case !sc.Overlap.Valid():
			return fmt.Errorf("SAS_SCHEDULES: schedule %s: overlap %q: want allow or skip", name, sc.Overlap)
		}
	}
	return nil
}
