package sas

import (
	"context"
	"fmt"
	"regexp"
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

// Judge is how the supervisor treats a due record of a step run by agents
// (normally one; a step name two workflows give to different agents has
// both). hold: an agent is paused, leave the record alone (no rescue, no
// wait, no give-up). Otherwise judgeAt is the time to judge the record at:
// now less the part of the agents' last pause that fell within the
// record's current attempt, which started at WaitingSince when the attempt
// waited, else at its last write (UpdatedAt). So a step claimed before a
// pause gets the whole pause back, one claimed during it counts from the
// resume, and one claimed after it nothing.
func (ps Pauses) Judge(rec StepRecord, now time.Time, agents ...string) (judgeAt time.Time, hold bool) {
	if ps.Paused(agents...) {
		return now, true
	}
	start := rec.WaitingSince
	if start.IsZero() {
		start = rec.UpdatedAt
	}
	var credit time.Duration
	for _, a := range agents {
		p, ok := ps[a]
		if !ok || p.PausedAt.IsZero() {
			continue
		}
		from := p.PausedAt
		if start.After(from) {
			from = start
		}
		if d := p.ResumedAt.Sub(from); d > credit {
			credit = d
		}
	}
	return now.Add(-credit), false
}
