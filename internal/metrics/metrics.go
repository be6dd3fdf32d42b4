// Package metrics is what the scheduler, the agents and the supervisor
// publish as metrics, and the one encoder they publish it with: CloudWatch
// Embedded Metric Format (EMF), one JSON line per event on the actor's
// stdout, which Lambda ships to CloudWatch Logs, which extracts the
// metrics. Unlike PutMetricData this costs no API call, no latency, no
// throttling and no extra failure mode, and the same line is a searchable
// log record (docs/observability.md).
//
// The names below are the only place a metric is named: the emitters, the
// construct's dashboard and alarms (infra/sascdk) and the docs' table (a
// test checks it) all use them.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every metric.
const Namespace = "SAS"

// Dimension names. Their values are bounded by the deployment's workflows
// and agents: never an order id, which would make a metric per order.
const (
	DimWorkflow = "Workflow"
	DimStep     = "Step"
	DimAgent    = "Agent"
)

// The agents' metrics, one line per request an agent ran: dimensions
// {Workflow, Step, Agent} and {Agent}.
const (
	// QueueWait is how long the request waited before the agent started
	// it: from when it was sent (SQS's SentTimestamp) to the start, a
	// retry interval's delay and earlier deliveries included.
	QueueWait = "QueueWait"
	// ExecutionTime is how long the agent's call took.
	ExecutionTime = "ExecutionTime"
	// One per outcome of a run, 1 on the line of the outcome it had.
	AgentDone      = "AgentDone"
	AgentFailed    = "AgentFailed"
	AgentTransient = "AgentTransient"
	AgentNoOutcome = "AgentNoOutcome" // left for redelivery, no reply
)

// The scheduler's metrics, one line per event it records: dimensions
// {Workflow, Step, Agent} and {} (the sum over the deployment), or
// {Workflow} and {} for an order's events.
const (
	OrdersSubmitted = "OrdersSubmitted" // an order created ({Workflow})
	OrdersProcessed = "OrdersProcessed" // an order's last step done ({Workflow})
	StepsDone       = "StepsDone"       // a done reply recorded
	StepsFailed     = "StepsFailed"     // a permanent failure recorded
	StepsTransient  = "StepsTransient"  // a transient outcome recorded: an attempt failed
	Retries         = "Retries"         // a next attempt scheduled after a failed one
	// CompensationsStarted: an order's compensation begun (its first undo
	// claimed, {Workflow}); CompensationsFinished: an order compensated.
	CompensationsStarted  = "CompensationsStarted"
	CompensationsFinished = "CompensationsFinished"
	// OrdersRejected: an order ended Rejected, a step refused as a
	// business outcome and what took effect undone ({Workflow}); counted
	// apart from failures, with no alert.
	OrdersRejected = "OrdersRejected"
)

// The supervisor's metrics, one line per sweep, no dimensions ({}).
// GiveUps is the scheduler's too (a step given up after its last failed
// attempt), on its {} dimension set, so the sum over the deployment counts
// both.
const (
	OldestStuckStepAge = "OldestStuckStepAgeSeconds"
	Rescues            = "Rescues" // steps handed back to the schedulers
	Waits              = "Waits"
	GiveUps            = "GiveUps"
	LostRaces          = "LostRaces"
	Held               = "Held"
	// OwedEffects counts give-ups whose effects (alert, compensate request)
	// a sweep left owed; OwedOldestAge is the age, from its give-up, of the
	// oldest of them, 0 when nothing is left owed.
	OwedEffects   = "OwedEffects"
	OwedOldestAge = "OwedOldestAgeSeconds"
)

// Unit is a CloudWatch unit.
type Unit string

const (
	Count        Unit = "Count"
	Seconds      Unit = "Seconds"
	Milliseconds Unit = "Milliseconds"
)

// Catalog lists every metric with its unit, for the docs' table and the
// construct's tests.
var Catalog = map[string]Unit{
	QueueWait: Milliseconds, ExecutionTime: Milliseconds,
	AgentDone: Count, AgentFailed: Count, AgentTransient: Count, AgentNoOutcome: Count,
	OrdersSubmitted: Count, OrdersProcessed: Count, StepsDone: Count, StepsFailed: Count, StepsTransient: Count,
	Retries: Count, CompensationsStarted: Count, CompensationsFinished: Count, OrdersRejected: Count,
	OldestStuckStepAge: Seconds, Rescues: Count, Waits: Count, GiveUps: Count, LostRaces: Count, Held: Count,
	OwedEffects: Count, OwedOldestAge: Seconds,
}

// Metric is one value of one line.
type Metric struct {
	Name  string
	Unit  Unit
	Value float64
}

// Line is one EMF record: its metrics, the dimension sets they are
// published under (each name in a set must be in Dims), the dimensions'
// values, and other members, logged but not metrics.
type Line struct {
	Time       time.Time
	Dimensions [][]string
	Dims       map[string]string
	Metrics    []Metric
	Properties map[string]any
}

// Encode renders a line as EMF JSON, newline included. With no dimension
// set, the metrics have none (an empty set), which is what an alarm on the
// sum over the deployment reads.
func Encode(l Line) []byte {
	type metric struct {
		Name string `json:"Name"`
		Unit Unit   `json:"Unit"`
	}
	type directive struct {
		Namespace  string     `json:"Namespace"`
		Dimensions [][]string `json:"Dimensions"`
		Metrics    []metric   `json:"Metrics"`
	}
	dims := l.Dimensions
	if len(dims) == 0 {
		dims = [][]string{{}}
	}
	d := directive{Namespace: Namespace, Dimensions: dims}
	root := map[string]any{}
	for k, v := range l.Properties {
		root[k] = v
	}
	for k, v := range l.Dims {
		root[k] = v
	}
	for _, m := range l.Metrics {
		d.Metrics = append(d.Metrics, metric{m.Name, m.Unit})
		root[m.Name] = m.Value
	}
	root["_aws"] = map[string]any{"Timestamp": l.Time.UnixMilli(), "CloudWatchMetrics": []directive{d}}
	b, err := json.Marshal(root) // sorted keys: the same line for the same event
	if err != nil {
		panic(fmt.Sprintf("encoding a metrics line: %v", err)) // numbers and strings only
	}
	return append(b, '\n')
}

// Emitter writes lines to a writer, one at a time. A nil *Emitter, or one
// on a nil writer, publishes nothing.
type Emitter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEmitter returns an emitter on w (nil: nothing is published).
func NewEmitter(w io.Writer) *Emitter { return &Emitter{w: w} }

// Emit writes one line. A line with no metric is not written.
func (e *Emitter) Emit(l Line) error {
	if e == nil || e.w == nil || len(l.Metrics) == 0 {
		return nil
	}
	b := Encode(l)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("writing the metrics line: %w", err)
	}
	return nil
}

// Names returns the catalogue's names, sorted.
func Names() []string {
	out := make([]string, 0, len(Catalog))
	for n := range Catalog {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Step is the dimensions of one step's line: {Workflow, Step, Agent} and
// rest. An empty value reads "unknown" (a message from an older build
// that does not carry it): CloudWatch takes no empty dimension value.
func Step(workflow, step, agent string, rest ...[]string) ([][]string, map[string]string) {
	sets := append([][]string{{DimWorkflow, DimStep, DimAgent}}, rest...)
	return sets, map[string]string{DimWorkflow: orUnknown(workflow), DimStep: orUnknown(step), DimAgent: orUnknown(agent)}
}

// StepName is the Step dimension's value: the step's name, with ":undo"
// after it for its undo, whose times and outcomes are not the step's.
func StepName(step string, undo bool) string {
	if undo && step != "" {
		return step + ":undo"
	}
	return step
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
