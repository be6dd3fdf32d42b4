package sas

import (
	"fmt"
	"slices"
	"sort"
)

// AgentQueue is where one agent takes its requests (docs/agents.md): its
// queue, and optionally a priority lane, a second queue that its function
// polls with its own concurrency, for orders of HighPriority and above.
type AgentQueue struct {
	URL         string `json:"url"`
	PriorityURL string `json:"priorityUrl,omitempty"`
	// RepliesURL is the agent's own reply queue, "" when it replies on
	// the scheduler queue (docs/trust.md, "A reply queue per agent").
	RepliesURL string `json:"repliesUrl,omitempty"`
}

// AgentQueues routes a step's request to its agent's queue: ByAgent
// (SAS_AGENT_QUEUES) for the agents listed there, Default
// (SAS_AGENT_QUEUE_URL) for any other.
type AgentQueues struct {
	Default string
	ByAgent map[string]AgentQueue
}

// URL is the queue for a request to agent from an order of the given
// priority, or "" when there is none.
func (q AgentQueues) URL(agent string, priority int) string {
	if a, ok := q.ByAgent[agent]; ok {
		if priority >= HighPriority && a.PriorityURL != "" {
			return a.PriorityURL
		}
		return a.URL
	}
	return q.Default
}

// All lists every queue, each once, sorted: the supervisor watches them all
// to tell waiting from lost work.
func (q AgentQueues) All() []string {
	var out []string
	add := func(u string) {
		if u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	add(q.Default)
	for _, a := range q.ByAgent {
		add(a.URL)
		add(a.PriorityURL)
	}
	sort.Strings(out)
	return out
}

// Empty reports whether no queue is configured.
func (q AgentQueues) Empty() bool { return len(q.All()) == 0 }

// Check fails naming every agent of reg that has no queue, so that a
// deployment missing one is refused at start-up, not at the first order.
func (q AgentQueues) Check(reg Registry) error {
	var missing []string
	for _, w := range reg {
		for _, s := range w.Steps {
			if s.Agentless() {
				continue // no agent: the outside world or its due time completes it
			}
			if q.URL(s.Agent, 0) == "" && !slices.Contains(missing, s.Agent) {
				missing = append(missing, s.Agent)
			}
		}
	}
	for name, a := range q.ByAgent {
		if a.URL == "" {
			return fmt.Errorf("agent %q: a queue url is required (SAS_AGENT_QUEUES)", name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("no queue for agent(s) %v: list them in SAS_AGENT_QUEUES or set SAS_AGENT_QUEUE_URL", missing)
	}
	return nil
}
