package config

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sizing"
)

// readers are the files that read the deployment's variables: this package,
// the agent SDK's handler and the built-in agent.
var readers = []string{"config.go", "deployment.go", "../../agent/handler.go", "../builtinagent/builtinagent.go"}

var varLiteral = regexp.MustCompile(`"(SAS_[A-Z0-9_]+)"`)

// TestDocumentedVariables: docs/state-store.md's configuration table names
// exactly the variables the code reads, so neither drifts from the other.
func TestDocumentedVariables(t *testing.T) {
	t.Parallel()
	var code []string
	for _, f := range readers {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range varLiteral.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(code, m[1]) {
				code = append(code, m[1])
			}
		}
	}
	sort.Strings(code)

	doc, err := os.ReadFile("../../docs/state-store.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "## Configuration")
	require.True(t, ok, "docs/state-store.md has a Configuration section")
	var documented []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `SAS_") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`(SAS_[A-Z0-9_]+)`").FindAllStringSubmatch(first, -1) {
			documented = append(documented, m[1])
		}
	}
	sort.Strings(documented)
	require.Equal(t, code, documented, "docs/state-store.md's table against the variables %v read", readers)
}

// TestDocumentedDefaults: the defaults docs/state-store.md's table and
// docs/deploy.md give are internal/sizing's, the one home of each.
func TestDocumentedDefaults(t *testing.T) {
	t.Parallel()
	secs := func(d interface{ Seconds() float64 }) string { return fmt.Sprintf("%ds", int(d.Seconds())) }
	defaults := []struct{ env, value string }{
		{"SAS_INDEX_SHARDS", fmt.Sprint(sizing.DefaultIndexShards)},
		{"SAS_MAX_FAILURES", fmt.Sprint(sizing.DefaultMaxAttempts)},
		{"SAS_STEP_TIMEOUT", secs(sizing.DefaultStepTimeout)},
		{"SAS_PICKUP_TIMEOUT", secs(sizing.DefaultPickupTimeout)},
	}
	doc, err := os.ReadFile("../../docs/state-store.md")
	require.NoError(t, err)
	deploy, err := os.ReadFile("../../docs/deploy.md")
	require.NoError(t, err)
	flat := strings.Join(strings.Fields(string(deploy)), " ")
	for _, d := range defaults {
		row := regexp.MustCompile("(?m)^\\| `" + d.env + "` \\|.*$").FindString(string(doc))
		require.NotEmpty(t, row, "docs/state-store.md's table has %s", d.env)
		require.Contains(t, row, "(default "+d.value+";", "docs/state-store.md's %s", d.env)
		require.Contains(t, flat, "`"+d.env+"` "+d.value, "docs/deploy.md's %s", d.env)
	}
	require.Contains(t, flat, fmt.Sprintf("the supervisor's default (%d minutes)", int(sizing.DefaultWaitLimit.Minutes())), "docs/deploy.md's wait limit")
}
