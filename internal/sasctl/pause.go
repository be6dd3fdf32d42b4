package sasctl

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

func (a *App) pauseStore() (sas.PauseStore, error) {
	ps, ok := a.Store.(sas.PauseStore)
	if !ok {
		return nil, fmt.Errorf("the store (%T) keeps no pauses", a.Store)
	}
	return ps, nil
}

// pause pauses an agent (docs/console.md, "Pausing an agent"): the pause is
// a record in the state table that the supervisor and the local pollers
// read. In a deployment, disable the agent's event source mappings too
// (the console's docs say how).
func (a *App) pause(ctx context.Context, args []string) error {
	return a.pauseOrResume(ctx, "pause", args)
}

func (a *App) resume(ctx context.Context, args []string) error {
	return a.pauseOrResume(ctx, "resume", args)
}

func (a *App) pauseOrResume(ctx context.Context, verb string, args []string) error {
	pos, err := parse(a.flags(verb), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s needs one agent name: %w", verb, ErrUsage)
	}
	var got sas.AgentPause
	var changed []string
	if verb == "pause" {
		got, changed, err = a.PauseAgent(ctx, pos[0])
	} else {
		got, changed, err = a.ResumeAgent(ctx, pos[0])
	}
	for _, c := range changed {
		fmt.Fprintf(a.Out, "event source mapping %s %sd\n", c, map[string]string{"pause": "disable", "resume": "enable"}[verb])
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, pos[0], err)
	}
	fmt.Fprintln(a.Out, describePause(got))
	return nil
}

// PauseAgent pauses an agent: the pause record first (the supervisor then
// holds its steps, local pollers stop), then, with Mappings, the event
// source mappings reading its queues are disabled. It returns the mappings
// it changed.
func (a *App) PauseAgent(ctx context.Context, agent string) (sas.AgentPause, []string, error) {
	ps, err := a.pauseStore()
	if err != nil {
		return sas.AgentPause{}, nil, err
	}
	got, err := ps.PauseAgent(ctx, sas.PauseParams{Agent: agent, Now: a.now(), Actor: a.Actor})
	if err != nil || a.Mappings == nil {
		return got, nil, err
	}
	changed, err := a.Mappings.Set(ctx, a.agentQueueURLs(agent), false)
	if err != nil {
		err = fmt.Errorf("paused, but the event source mappings are not all disabled (the agent may still consume): %w", err)
	}
	return got, changed, err
}

// ResumeAgent resumes an agent: its event source mappings are enabled
// first (with Mappings), then the pause record ends.
func (a *App) ResumeAgent(ctx context.Context, agent string) (sas.AgentPause, []string, error) {
	ps, err := a.pauseStore()
	if err != nil {
		return sas.AgentPause{}, nil, err
	}
	var changed []string
	if a.Mappings != nil {
		if changed, err = a.Mappings.Set(ctx, a.agentQueueURLs(agent), true); err != nil {
			return sas.AgentPause{}, changed, fmt.Errorf("enabling the event source mappings (the agent stays paused): %w", err)
		}
	}
	got, err := ps.ResumeAgent(ctx, sas.PauseParams{Agent: agent, Now: a.now(), Actor: a.Actor})
	return got, changed, err
}

// agentQueueURLs are the queues an agent consumes: its own and its lane,
// or the shared agent queue.
func (a *App) agentQueueURLs(agent string) []string {
	if q, ok := a.AgentQueues.ByAgent[agent]; ok {
		var out []string
		for _, u := range []string{q.URL, q.PriorityURL} {
			if u != "" {
				out = append(out, u)
			}
		}
		return out
	}
	if a.AgentQueues.Default != "" {
		return []string{a.AgentQueues.Default}
	}
	return nil
}

func (a *App) pauses(ctx context.Context, args []string) error {
	if _, err := parse(a.flags("pauses"), args); err != nil {
		return err
	}
	ps, err := a.pauseStore()
	if err != nil {
		return err
	}
	all, err := ps.AgentPauses(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(a.Out, describePause(all[n]))
	}
	return nil
}

func describePause(p sas.AgentPause) string {
	switch {
	case p.Paused():
		return fmt.Sprintf("%s paused since %s by %s", p.Agent, p.PausedAt.Format(time.RFC3339), p.Actor)
	case !p.PausedAt.IsZero():
		return fmt.Sprintf("%s running (paused %s, resumed %s by %s)", p.Agent, p.PausedAt.Format(time.RFC3339), p.ResumedAt.Format(time.RFC3339), p.Actor)
	}
	return p.Agent + " running (never paused)"
}
