package sas

import (
	"context"
	"fmt"
	"time"
)

// StepDef is one step of a workflow: which agent runs it, how long it may
// take, and how it is undone.
type StepDef struct {
	Name    string
	Agent   string        // the agent that runs it (e.g. "payments")
	Action  string        // what the agent does (e.g. "POST /payments")
	Undo    string        // what undoes it (e.g. "POST /refunds"); "" if nothing to undo
	Timeout time.Duration // the step's time limit: CompleteBy = claim time + Timeout
}

// Workflow is an ordered list of steps. Workflow logic lives with the
// scheduler; the supervisor never looks at it.
type Workflow struct {
	Name  string
	Steps []StepDef
}

// StepNames lists the step names in order.
func (w Workflow) StepNames() []string {
	out := make([]string, len(w.Steps))
	for i, s := range w.Steps {
		out[i] = s.Name
	}
	return out
}

// Registry holds the workflows a deployment runs.
type Registry map[string]Workflow

// NewRegistry checks and indexes workflows.
func NewRegistry(ws ...Workflow) (Registry, error) {
	r := Registry{}
	for _, w := range ws {
		if w.Name == "" || len(w.Steps) == 0 {
			return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%q needs a name and at least one step", w.Name)}
		}
		if _, dup := r[w.Name]; dup {
			return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%q registered twice", w.Name)}
		}
		for _, s := range w.Steps {
			if s.Name == "" || s.Agent == "" || s.Timeout <= 0 {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s: every step needs a name, an agent and a timeout", w.Name)}
			}
		}
		r[w.Name] = w
	}
	return r, nil
}

// Has reports whether a workflow is registered.
func (r Registry) Has(name string) bool { _, ok := r[name]; return ok }

// Alert is what an operator is told: an order step that needs a person.
type Alert struct {
	OrderID  string
	Step     int
	StepName string
	State    ProcessState // Error or CompensationFailed
	Reason   string
	Attempts int
	Failures int
	At       time.Time
	Source   string // "scheduler" or "supervisor"

	// ID names the event the alert is about, stable across re-sends (see
	// AlertID), so that a receiver can tell a re-driven alert from a new one.
	ID string
}

// Alerter raises operator alerts (SNS, EventBridge, a log in local runs).
type Alerter interface {
	Alert(ctx context.Context, a Alert) error
}
