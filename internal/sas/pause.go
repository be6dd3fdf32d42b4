package sas

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"
)

// AgentPause is an operator's pause of one agent (docs/console.md,
// "Pausing an agent"): while it holds, the agent's queues are not consumed
// and the supervisor leaves the agent's steps alone; after the resume, the
// time paused does not count against those steps' limits.
type AgentPause struct {
	Agent     string
	PausedAt  time.Time // when the current (or last) pause began
	ResumedAt time.Time // zero while paused
	Actor     string    // who paused or resumed it last
}

// Paused reports whether the pause holds.
func (p AgentPause) Paused() bool { return !p.PausedAt.IsZero() && p.ResumedAt.IsZero() }

// PauseParams pauses or resumes one agent.
type PauseParams struct {
	Agent string
	Now   time.Time
	Actor string
}

var agentName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// Check validates the parameters.
func (p PauseParams) Check() error {
	if !agentName.MatchString(p.Agent) {
		return &ValidationError{Field: "agent", Reason: fmt.Sprintf("%q: want 1-128 characters of [A-Za-z0-9._:-]", p.Agent)}
	}
	if p.Now.IsZero() {
		return &ValidationError{Field: "now", Reason: "zero"}
	}
	return nil
}

// PauseStore keeps the agents' pauses in the state table, where the
// supervisor and the local pollers read them. Pausing a paused agent, or
// resuming one that runs, changes nothing and returns the pause as it is.
type PauseStore interface {
	PauseAgent(ctx context.Context, p PauseParams) (AgentPause, error)
	ResumeAgent(ctx context.Context, p PauseParams) (AgentPause, error)
	// AgentPauses returns every agent ever paused (one read), by name.
	AgentPauses(ctx context.Context) (Pauses, error)
}

// Pauses are the agents' pauses by agent name.
type Pauses map[string]AgentPause

// Paused reports whether any of the agents is paused.
func (ps Pauses) Paused(agents ...string) bool {
	for _, a := range agents {
		if ps[a].Paused() {
			return true
		}
	}
	return false
}

// Adjust is how the supervisor sees a due record of a step run by agents
// (normally one; a step name two workflows give to different agents has
// both). hold: one of them is paused, leave the record alone (no rescue,
// no wait, no give-up). Otherwise the record is returned with its time
// anchors moved later by the part of the agents' last pause that came
// after each: the deadline by the pause after the lease began (its last
// write, UpdatedAt), WaitingSince (the wait limit's start) and CreatedAt
// (the total limit's) by the pause after them. So a step claimed before a
// pause gets the whole pause back, one claimed during it counts from the
// resume, one claimed after it nothing. Decide on the adjusted record;
// fence the write on the stored one.
func (ps Pauses) Adjust(rec StepRecord, agents ...string) (adjusted StepRecord, hold bool) {
	if ps.Paused(agents...) {
		return rec, true
	}
	after := func(anchor time.Time) time.Duration {
		var credit time.Duration
		for _, a := range agents {
			p, ok := ps[a]
			if !ok || p.PausedAt.IsZero() || anchor.IsZero() {
				continue
			}
			from := p.PausedAt
			if anchor.After(from) {
				from = anchor
			}
			credit = max(credit, p.ResumedAt.Sub(from))
		}
		return credit
	}
	if !rec.DueAt.IsZero() {
		rec.DueAt = rec.DueAt.Add(after(rec.UpdatedAt))
	}
	if !rec.WaitingSince.IsZero() {
		rec.WaitingSince = rec.WaitingSince.Add(after(rec.WaitingSince))
	}
	if !rec.CreatedAt.IsZero() {
		rec.CreatedAt = rec.CreatedAt.Add(after(rec.CreatedAt))
	}
	return rec, false
}

// PauseReader reads the agents' pauses (the supervisor, the local pollers).
type PauseReader interface {
	AgentPauses(ctx context.Context) (Pauses, error)
}

// StepAgents maps each step name of the registry to the agents that run
// it (one, unless workflows give the same step name to different agents).
func (r Registry) StepAgents() map[string][]string {
	out := map[string][]string{}
	for _, w := range r {
		for _, s := range w.Steps {
			if !slices.Contains(out[s.Name], s.Agent) {
				out[s.Name] = append(out[s.Name], s.Agent)
			}
		}
	}
	for _, as := range out {
		slices.Sort(as)
	}
	return out
}
