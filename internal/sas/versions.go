package sas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Workflow versions (docs/workflows.md, "Versions"): an order runs to its
// end on the definition it was submitted with. The scheduler stamps each
// new order with its workflow's Version, stores that definition under its
// version before the first such order exists (DefinitionStore), and runs an
// order whose version it does not have in its registry (one submitted
// before a deploy changed the workflow) on the stored definition.

// versionedStep is the canonical form of a StepDef: what Version hashes and
// what DefinitionStore keeps. Durations in milliseconds.
type versionedStep struct {
	Name        string `json:"name"`
	Agent       string `json:"agent"`
	Action      string `json:"action,omitempty"`
	Undo        string `json:"undo,omitempty"`
	TimeoutMs   int64  `json:"timeoutMs"`
	WaitMs      int64  `json:"waitLimitMs,omitempty"`
	TotalMs     int64  `json:"totalLimitMs,omitempty"`
	MaxFailures int    `json:"maxFailures,omitempty"`
	BaseMs      int64  `json:"baseBackoffMs,omitempty"`
	MaxMs       int64  `json:"maxBackoffMs,omitempty"`
	Tries       int    `json:"tries,omitempty"`
	// Added by issue 19, omitted when unset so that a definition without
	// them keeps the version it had.
	Coefficient  float64  `json:"backoffCoefficient,omitempty"`
	NonRetryable []string `json:"nonRetryable,omitempty"`
	// The undo's own retry policy, omitted when the step sets none, so
	// that a definition without one keeps its version.
	UndoRetry *versionedRetry `json:"undoRetry,omitempty"`
	// The steps it follows (issue 27), omitted for the step before it, so
	// that a straight line keeps its version.
	After *[]int `json:"after,omitempty"`
	// The step's condition (issue 27), omitted when unset.
	When string `json:"when,omitempty"`
	// A callback step's wait (issue 28), omitted for every other step so
	// that a definition without one keeps its version.
	Callback *versionedCallback `json:"callback,omitempty"`
	// A wait step's wait (issue 28 §2), omitted for every other step.
	Timer *versionedTimer `json:"timer,omitempty"`
	// A fan-out's list and window (issue 27 §4), omitted for every other
	// step.
	ForEach *versionedForEach `json:"forEach,omitempty"`
}

// versionedForEach is a fan-out in a versionedStep.
type versionedForEach struct {
	Items       string `json:"items"`
	Concurrency int    `json:"concurrency,omitempty"`
}

// versionedTimer is a wait step's wait in a versionedStep.
type versionedTimer struct {
	ForMs int64  `json:"forMs,omitempty"`
	Until string `json:"until,omitempty"`
}

// versionedCallback is a callback step's wait in a versionedStep.
type versionedCallback struct {
	TimeoutMs   int64 `json:"timeoutMs"`
	HeartbeatMs int64 `json:"heartbeatMs,omitempty"`
}

// versionedRetry is an undo's retry policy in a versionedStep.
type versionedRetry struct {
	MaxAttempts  int      `json:"maxAttempts,omitempty"`
	InitialMs    int64    `json:"initialIntervalMs,omitempty"`
	MaxMs        int64    `json:"maxIntervalMs,omitempty"`
	Coefficient  float64  `json:"backoffCoefficient,omitempty"`
	NonRetryable []string `json:"nonRetryable,omitempty"`
}

type versionedWorkflow struct {
	Name  string          `json:"name"`
	Steps []versionedStep `json:"steps"`
}

// EncodeWorkflow is the canonical encoding of a definition: the same
// definition always encodes to the same bytes.
func EncodeWorkflow(w Workflow) []byte {
	v := versionedWorkflow{Name: w.Name, Steps: make([]versionedStep, len(w.Steps))}
	for i, s := range w.Steps {
		v.Steps[i] = versionedStep{
			Name: s.Name, Agent: s.Agent, Action: s.Action, Undo: s.Undo,
			TimeoutMs: s.Timeout.Milliseconds(), WaitMs: s.WaitLimit.Milliseconds(), TotalMs: s.TotalLimit.Milliseconds(),
			MaxFailures: s.MaxFailures, BaseMs: s.BaseBackoff.Milliseconds(), MaxMs: s.MaxBackoff.Milliseconds(),
			Tries: s.Tries, Coefficient: s.BackoffCoefficient, NonRetryable: s.NonRetryable, When: s.When,
		}
		if u := s.UndoRetry; u != (RetryPolicy{}) || len(s.UndoNonRetryable) > 0 {
			v.Steps[i].UndoRetry = &versionedRetry{MaxAttempts: u.MaxAttempts, InitialMs: u.InitialInterval.Milliseconds(),
				MaxMs: u.MaxInterval.Milliseconds(), Coefficient: u.Coefficient, NonRetryable: s.UndoNonRetryable}
		}
		if s.After != nil {
			after := slices.Clone(s.After)
			v.Steps[i].After = &after
		}
		if c := s.Callback; c != nil {
			v.Steps[i].Callback = &versionedCallback{TimeoutMs: c.Timeout.Milliseconds(), HeartbeatMs: c.Heartbeat.Milliseconds()}
		}
		if t := s.Timer; t != nil {
			v.Steps[i].Timer = &versionedTimer{ForMs: t.For.Milliseconds(), Until: t.Until}
		}
		if f := s.ForEach; f != nil {
			v.Steps[i].ForEach = &versionedForEach{Items: f.Items, Concurrency: f.Concurrency}
		}
	}
	b, _ := json.Marshal(v) // cannot fail: strings and numbers only
	return b
}

// DecodeWorkflow reads what EncodeWorkflow wrote.
func DecodeWorkflow(b []byte) (Workflow, error) {
	var v versionedWorkflow
	if err := json.Unmarshal(b, &v); err != nil {
		return Workflow{}, fmt.Errorf("decoding a stored workflow definition: %w", err)
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	w := Workflow{Name: v.Name, Steps: make([]StepDef, len(v.Steps))}
	for i, s := range v.Steps {
		w.Steps[i] = StepDef{
			Name: s.Name, Agent: s.Agent, Action: s.Action, Undo: s.Undo,
			Timeout: ms(s.TimeoutMs), WaitLimit: ms(s.WaitMs), TotalLimit: ms(s.TotalMs),
			MaxFailures: s.MaxFailures, BaseBackoff: ms(s.BaseMs), MaxBackoff: ms(s.MaxMs),
			Tries: s.Tries, BackoffCoefficient: s.Coefficient, NonRetryable: s.NonRetryable, When: s.When,
		}
		if u := s.UndoRetry; u != nil {
			w.Steps[i].UndoRetry = RetryPolicy{MaxAttempts: u.MaxAttempts, InitialInterval: ms(u.InitialMs),
				MaxInterval: ms(u.MaxMs), Coefficient: u.Coefficient}
			w.Steps[i].UndoNonRetryable = u.NonRetryable
		}
		if a := s.After; a != nil {
			w.Steps[i].After = append([]int{}, *a...)
		}
		if c := s.Callback; c != nil {
			w.Steps[i].Callback = &Callback{Timeout: ms(c.TimeoutMs), Heartbeat: ms(c.HeartbeatMs)}
		}
		if t := s.Timer; t != nil {
			w.Steps[i].Timer = &Timer{For: ms(t.ForMs), Until: t.Until}
		}
		if f := s.ForEach; f != nil {
			w.Steps[i].ForEach = &ForEach{Items: f.Items, Concurrency: f.Concurrency}
		}
	}
	if w.Name == "" || len(w.Steps) == 0 {
		return Workflow{}, fmt.Errorf("decoding a stored workflow definition: no name or no steps")
	}
	return w, nil
}

// Version fingerprints the definition: 16 hex digits of the SHA-256 of its
// canonical encoding. Any change to a step (its name, agent, action, undo,
// limits or retry policy) gives another version.
func (w Workflow) Version() string {
	sum := sha256.Sum256(EncodeWorkflow(w))
	return hex.EncodeToString(sum[:8])
}

// DefinitionStore keeps every workflow definition an order was submitted
// with, by name and version. Definitions are immutable: storing a version
// again is a no-op.
type DefinitionStore interface {
	// PutDefinition stores w under (w.Name, w.Version()).
	PutDefinition(ctx context.Context, w Workflow) error
	// GetDefinition reads a stored definition; an error that errors.Is
	// ErrNotFound when there is none.
	GetDefinition(ctx context.Context, name, version string) (Workflow, error)
}

// Definitions finds the definition an order runs on: the registered one
// when the order's version is its own (or "" for an order from before
// versions), else the one stored when the order was submitted. Stored
// definitions are immutable, so each is read once per process. Safe for
// concurrent use.
type Definitions struct {
	registry Registry
	store    DefinitionStore
	versions map[string]string // the version of each registered workflow
	cache    sync.Map          // "name#version" -> Workflow read from the store
}

// NewDefinitions indexes the registered workflows' versions.
func NewDefinitions(reg Registry, store DefinitionStore) *Definitions {
	d := &Definitions{registry: reg, store: store, versions: make(map[string]string, len(reg))}
	for name, w := range reg {
		d.versions[name] = w.Version()
	}
	return d
}

// Registered returns the version of the registered workflow name ("" if
// none is registered).
func (d *Definitions) Registered(name string) string { return d.versions[name] }

// Get returns the definition of workflow name at version, and whether it
// came from the store (an earlier version than the registered one). An
// order of an unregistered workflow without a version, or of a version
// neither registered nor stored, is an error that errors.Is ErrNotFound.
func (d *Definitions) Get(ctx context.Context, name, version string) (w Workflow, stored bool, err error) {
	if w, ok := d.registry[name]; ok && (version == "" || version == d.versions[name]) {
		return w, false, nil
	}
	if version == "" {
		return Workflow{}, false, fmt.Errorf("workflow %q is not registered in this deployment: %w", name, ErrNotFound)
	}
	key := name + "#" + version
	if w, ok := d.cache.Load(key); ok {
		return w.(Workflow), true, nil
	}
	if d.store == nil {
		return Workflow{}, false, fmt.Errorf("workflow %q version %s is not registered: %w", name, version, ErrNotFound)
	}
	w, err = d.store.GetDefinition(ctx, name, version)
	if err != nil {
		return Workflow{}, false, err
	}
	d.cache.Store(key, w)
	return w, true, nil
}

// Attach gives the view the definition its order runs on (OrderView.Def),
// so that its State and Settled know which steps have an undo. A definition
// it cannot find (a workflow no longer registered, a store that fails)
// leaves the view as it was: read from its records alone.
func (d *Definitions) Attach(ctx context.Context, v OrderView) OrderView {
	if d == nil || v.Order.Workflow == "" {
		return v
	}
	w, _, err := d.Get(ctx, v.Order.Workflow, v.Order.Version)
	if err != nil || len(w.Steps) != len(v.Order.Steps) {
		return v
	}
	v.Def = &w
	return v
}
