package config

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
