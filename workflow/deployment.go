package workflow

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Deployment is a workflow file's optional "deployment" section: the
// deployment's agents with their queues and priority lanes, and its limits.
// The CDK construct (infra/sascdk) writes it into the file it ships beside
// every function's bootstrap, so that the configuration of a hundred agents
// does not have to fit Lambda's 4 KB environment; the functions read it at
// start-up (SAS_WORKFLOWS_FILE names the file). Validate is what both
// check, so a problem reads the same at synth and at start.
type Deployment struct {
	// Agents maps an agent's name to its queues.
	Agents map[string]AgentQueues `json:"agents,omitempty"`
	// Limits are the deployment's defaults; unset, the environment's or
	// the built-in ones apply.
	Limits *Limits `json:"limits,omitempty"`
}

// AgentQueues names one agent's request queue and, when it has one, its
// priority lane and its reply queue. Each is a queue URL, or a queue name,
// which the functions resolve against the scheduler queue's URL (same
// account, region and endpoint): the construct writes names, which it
// knows at synth, where the URLs are known only once deployed.
type AgentQueues struct {
	Queue         string `json:"queue"`
	PriorityQueue string `json:"priorityQueue,omitempty"`
	// Replies is the agent's own reply queue (docs/trust.md, "A reply
	// queue per agent"): the scheduler reads a message from it as from
	// this agent alone. Absent: the agent replies on the scheduler queue.
	Replies string `json:"replies,omitempty"`
}

// Limits are a deployment's limits, each the file's form of one
// environment variable (docs/state-store.md); a limit may be set in one
// place, not both.
type Limits struct {
	MaxFailures   int      `json:"maxFailures,omitempty"`   // SAS_MAX_FAILURES
	StepTimeout   Duration `json:"stepTimeout,omitempty"`   // SAS_STEP_TIMEOUT
	PickupTimeout Duration `json:"pickupTimeout,omitempty"` // SAS_PICKUP_TIMEOUT
	WaitLimit     Duration `json:"waitLimit,omitempty"`     // SAS_WAIT_LIMIT
	IndexShards   int      `json:"indexShards,omitempty"`   // SAS_INDEX_SHARDS
}

// MaxAgents bounds a deployment's agents (and so the file's size).
const MaxAgents = 1000

var (
	queueNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	queueURLPattern  = regexp.MustCompile(`^https?://[^/\s]+/[^/\s]+/[A-Za-z0-9_-]{1,80}$`)
)

// Validate reports every problem of the section, each a *FieldError naming
// file (may be empty) and the field ("deployment.agents.payments.queue").
func (d Deployment) Validate(file string) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{File: file, Path: "deployment." + path, Reason: fmt.Sprintf(format, args...)})
	}
	if len(d.Agents) > MaxAgents {
		bad("agents", "%d agents: at most %d", len(d.Agents), MaxAgents)
	}
	names := make([]string, 0, len(d.Agents))
	for n := range d.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	queues := map[string]string{}
	for _, n := range names {
		a := d.Agents[n]
		ap := "agents." + n
		if !namePattern.MatchString(n) {
			bad(ap, "agent name %q: must be 1-64 characters of A-Z a-z 0-9 . _ -", n)
		}
		for _, q := range []struct{ field, v string }{{"queue", a.Queue}, {"priorityQueue", a.PriorityQueue}, {"replies", a.Replies}} {
			switch {
			case q.v == "" && q.field == "queue":
				bad(ap+".queue", "required: a queue URL or a queue name")
			case q.v == "":
			case !queueNamePattern.MatchString(q.v) && !queueURLPattern.MatchString(q.v):
				bad(ap+"."+q.field, "%q: want a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>) or a queue name of 1-80 characters of A-Z a-z 0-9 - _", q.v)
			default:
				if other, dup := queues[q.v]; dup {
					bad(ap+"."+q.field, "%q is also %s: every agent queue, lane and reply queue is its own", q.v, other)
				}
				queues[q.v] = ap + "." + q.field
			}
		}
	}
	if l := d.Limits; l != nil {
		if l.MaxFailures < 0 || l.MaxFailures > 100 {
			bad("limits.maxFailures", "%d: want 1 to 100, or absent", l.MaxFailures)
		}
		if l.IndexShards < 0 || l.IndexShards > 1000 {
			bad("limits.indexShards", "%d: want 1 to 1000, or absent", l.IndexShards)
		}
		for _, f := range []struct {
			field string
			d     Duration
		}{{"stepTimeout", l.StepTimeout}, {"pickupTimeout", l.PickupTimeout}, {"waitLimit", l.WaitLimit}} {
			if f.d < 0 {
				bad("limits."+f.field, "%s: want a positive duration, or absent", f.d.D())
			}
		}
	}
	return joinErrors(errs)
}

// joinErrors is nil, the one error, or all of them one per line.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fieldErrors{errs: errs, msg: strings.Join(msgs, "\n")}
}

type fieldErrors struct {
	errs []error
	msg  string
}

func (e fieldErrors) Error() string   { return e.msg }
func (e fieldErrors) Unwrap() []error { return e.errs }

// LoadFile reads a whole workflow file: its workflows and its deployment
// section. A file may hold only a deployment section (Workflows nil): the
// functions then run their built-in reference workflows.
func LoadFile(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, &FieldError{File: path, Reason: fmt.Sprintf("cannot read the workflow file: %v", err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return File{}, &FieldError{File: path, Reason: fmt.Sprintf("cannot read the workflow file: %v", err)}
	}
	return ParseFile(path, data)
}
