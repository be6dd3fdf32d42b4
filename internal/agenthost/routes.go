package agenthost

import (
	"fmt"
	"slices"

	"github.com/sas-go/sas/internal/sas"
)

// Route is what an HTTP agent does for one step: the step's Action and the
// Undo that compensates it, each "METHOD /path" as in sas.StepDef. An empty
// Undo means there is nothing to undo.
type Route struct {
	Action string
	Undo   string
}

// Routes maps a step name to its Route, for one agent.
//
// Why by step name: every agent.request carries the agent and the step's
// name, but only newer schedulers add the workflow (as a field the agent
// echoes, not one it routes on), so (agent, step name) is the key the agent
// can always look up. RoutesFromRegistry refuses a registry where that key
// is ambiguous.
type Routes map[string]Route

// RoutesFromRegistry collects the routes of one agent's steps from the
// workflow registry. Two workflows may share a step name only if they give it
// the same Action and Undo: the agent routes by step name (a request need not
// say which workflow it came from), so anything else is refused here, at
// start-up, rather than guessed at run time.
func RoutesFromRegistry(reg sas.Registry, agent string) (Routes, error) {
	names := make([]string, 0, len(reg))
	for n := range reg {
		names = append(names, n)
	}
	slices.Sort(names) // a stable error message
	out := Routes{}
	from := map[string]string{} // step name → the workflow that defined it first
	for _, wn := range names {
		for _, s := range reg[wn].Steps {
			if s.Agent != agent {
				continue
			}
			r := Route{Action: s.Action, Undo: s.Undo}
			if prev, ok := out[s.Name]; ok && prev != r {
				return nil, fmt.Errorf("routes of agent %q: step %q is %+v in workflow %q but %+v in %q; agents route by step name, so step names must agree: %w",
					agent, s.Name, prev, from[s.Name], r, wn, sas.ErrInvalid)
			}
			out[s.Name], from[s.Name] = r, wn
		}
	}
	return out, nil
}
