package sim_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// Agent-issued tokens and operators' completions by name are exercised
// (issue 28 §1, §7): among the first callback seeds, the remote learns
// tokens from agents' calls and the outside world's completions of them
// take effect; an agent's failure fails such a step; operators name
// waiting steps on the control queue, which completes some, and
// applications name them on the intake queue, which completes none (the
// rules hold: no run fails).
func TestAgentTokensAndNamedCompletionsAreExercised(t *testing.T) {
	t.Parallel()
	counts := callbackSeedsCount(t, agentTokenSigns)
	t.Logf("agent-token and named completion events over 60 seeds: %v", counts)
	for what := range agentTokenSigns {
		require.Positive(t, counts[what], "no seed of 60 %s", what)
	}
}

var agentTokenSigns = map[string]*regexp.Regexp{
	"let the remote learn a token from an agent's call": regexp.MustCompile(`remote: holds the token of`),
	"completed an agent-token step":                     regexp.MustCompile(`callback o\d+/\d+ attempt \d+: Processed by a completion \(a step whose agent`),
	"failed an agent-token step":                        regexp.MustCompile(`callback o\d+/\d+ attempt \d+: Error by a completion \(a step whose agent`),
	"named a waiting step from the control queue":       regexp.MustCompile(`operator: names done the step as it reads .* \(Processing\)`),
	"named a step on the intake queue":                  regexp.MustCompile(`an application names .* to intake \(`),
	"named another attempt, generation or holder":       regexp.MustCompile(`operator: names \w+ another (attempt|generation|holder)`),
	"named a step no longer waiting":                    regexp.MustCompile(`operator: names \w+ the step as it reads .* \((Processed|Error|Compensat)`),
}
