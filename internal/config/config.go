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
)

// Config is everything the functions and tools read from the environment.
type Config struct {
	OrdersTable, StateTable string
	IndexShards             int
	IntakeQueueURL          string
	SchedulerQueueURL       string
	AgentQueueURL           string
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
	AlertTopicARN         string
	EventBusName          string
	MaxFailures           int
	StepTimeout           time.Duration
	PickupTimeout         time.Duration
	// WaitLimit is SAS_WAIT_LIMIT: how long past its deadline a held step
	// may wait while the agent and scheduler queues hold messages, for a
	// step whose definition sets no wait limit. 0 (unset) leaves the
	// supervisor's default (supervisor.DefaultWaitLimit).
	WaitLimit   time.Duration
	PaymentsURL string
	// WorkflowsFile is SAS_WORKFLOWS_FILE: a workflow file (package
	// workflow) that replaces the reference workflows. Checked at start-up.
	WorkflowsFile string
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
		AgentQueueURL:         getenv("SAS_AGENT_QUEUE_URL"),
		AgentPriorityQueueURL: getenv("SAS_AGENT_PRIORITY_QUEUE_URL"),
		AlertTopicARN:         getenv("SAS_ALERT_TOPIC_ARN"),
		EventBusName:          getenv("SAS_EVENT_BUS_NAME"),
		PaymentsURL:           getenv("SAS_PAYMENTS_URL"),
		WorkflowsFile:         getenv("SAS_WORKFLOWS_FILE"),
	}
	for _, q := range strings.Split(getenv("SAS_ALLOWED_REPLY_QUEUES"), ",") {
		if q = strings.TrimSpace(q); q != "" {
			c.AllowedReplyQueues = append(c.AllowedReplyQueues, q)
		}
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
	var err error
	if c.IndexShards, err = intVar(getenv, "SAS_INDEX_SHARDS", 8); err != nil {
		return c, err
	}
	if c.MaxFailures, err = intVar(getenv, "SAS_MAX_FAILURES", 3); err != nil {
		return c, err
	}
	if c.StepTimeout, err = durVar(getenv, "SAS_STEP_TIMEOUT", 30*time.Second); err != nil {
		return c, err
	}
	if c.PickupTimeout, err = durVar(getenv, "SAS_PICKUP_TIMEOUT", time.Minute); err != nil {
		return c, err
	}
	if c.WaitLimit, err = durVar(getenv, "SAS_WAIT_LIMIT", 0); err != nil {
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

// ReplyToAllowed reports whether a submitter may name url as its replyTo.
func (c Config) ReplyToAllowed(url string) bool {
	for _, a := range c.AllowedReplyQueues {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(url, p) {
				return true
			}
		} else if url == a {
			return true
		}
	}
	return false
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
