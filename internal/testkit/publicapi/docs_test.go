package publicapi

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/sas"
)

// The docs list what the code defines in three places; each list is checked
// against the code here (the configuration variables: internal/config's
// TestDocumentedVariables).

// docs/state-store.md names every process state, in the code's order.
func TestDocumentedStates(t *testing.T) {
	t.Parallel()
	require.Equal(t, sas.States, documentedStates(t, "`ProcessState` \\(([^)]*)\\)"))
}

// docs/state-store.md names every state an order can be in (a step's, and
// Rejected), in the code's order.
func TestDocumentedOrderStates(t *testing.T) {
	t.Parallel()
	require.Equal(t, sas.OrderStates, documentedStates(t, "an order state \\(([^)]*)\\)"))
}

// documentedStates are the states docs/state-store.md lists as (A | B |
// …) where pattern's group finds them.
func documentedStates(t *testing.T, pattern string) []sas.ProcessState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "state-store.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(pattern).FindSubmatch(b)
	require.NotNil(t, m, "docs/state-store.md lists the states as %s", pattern)
	var documented []sas.ProcessState
	for _, s := range strings.Split(strings.Join(strings.Fields(string(m[1])), " "), " | ") {
		documented = append(documented, sas.ProcessState(s))
	}
	return documented
}

// docs/intake.md's table of intake fields is the JSON of sas.Intake.
func TestDocumentedIntakeFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "intake.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| field | required | rule |")
	require.True(t, ok)
	table, _, _ = strings.Cut(table, "\n\n")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|").FindAllStringSubmatch(table, -1) {
		documented = append(documented, m[1])
	}
	var code []string
	typ := reflect.TypeOf(sas.Intake{})
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			code = append(code, name)
		}
	}
	sort.Strings(documented)
	sort.Strings(code)
	require.Equal(t, code, documented, "docs/intake.md's intake fields against sas.Intake")
}

// docs/observability.md's table of metrics is internal/metrics.Catalog:
// every name, with its unit.
func TestObservabilityDocListsEveryMetric(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "observability.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| metric | unit | from | dimensions | meaning |")
	require.True(t, ok, "docs/observability.md has the table of metrics")
	table, _, _ = strings.Cut(table, "\n\n")
	documented := map[string]metrics.Unit{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\| ([A-Za-z]+) \\|").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = metrics.Unit(m[2])
	}
	require.Equal(t, metrics.Catalog, documented, "docs/observability.md's metrics against internal/metrics.Catalog")
}

// docs/intake.md's table of statuses names every status the scheduler posts.
func TestDocumentedStatuses(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "intake.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| `status` | when |")
	require.True(t, ok)
	table, _, _ = strings.Cut(table, "\n\n")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(table, -1) {
		documented = append(documented, m[1])
	}
	code := []string{sas.StatusReceived, sas.StatusRejected, sas.StatusStepDone, sas.StatusProcessed, sas.StatusFailed, sas.StatusCompensated,
		sas.StatusCancelled, sas.StatusCancelRefused, sas.StatusWaiting, sas.StatusStepSkipped}
	sort.Strings(documented)
	sort.Strings(code)
	require.Equal(t, code, documented)
}

// docs/protocol.md's table of messages lists every JSON field of every
// kind's type, and every kind.
func TestDocumentedMessageFields(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "protocol.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "| kind | type | fields |")
	require.True(t, ok, "docs/protocol.md has the table of messages")
	table, _, _ = strings.Cut(table, "\n\n")
	types := map[sas.Kind]reflect.Type{
		sas.KindIntake: reflect.TypeOf(sas.Intake{}), sas.KindAgentRequest: reflect.TypeOf(sas.AgentRequest{}),
		sas.KindAgentReply: reflect.TypeOf(sas.AgentReply{}), sas.KindRetry: reflect.TypeOf(sas.Retry{}),
		sas.KindCompensate: reflect.TypeOf(sas.Compensate{}), sas.KindStatus: reflect.TypeOf(sas.Status{}),
		sas.KindCancel: reflect.TypeOf(sas.Cancel{}), sas.KindComplete: reflect.TypeOf(sas.Completion{}),
		sas.KindRedrive: reflect.TypeOf(sas.Redrive{}),
	}
	seen := map[sas.Kind]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z.]+)` \\| `sas\\.([A-Za-z]+)` \\| (.*) \\|$").FindAllStringSubmatch(table, -1) {
		kind := sas.Kind(m[1])
		typ, ok := types[kind]
		require.True(t, ok, "kind %q is no message kind", kind)
		require.Equal(t, typ.Name(), m[2], "kind %q", kind)
		seen[kind] = true
		var documented []string
		for _, f := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(m[3], -1) {
			documented = append(documented, f[1])
		}
		var code []string
		for i := range typ.NumField() {
			if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
				code = append(code, name)
			}
		}
		require.Equal(t, code, documented, "docs/protocol.md's %s fields against sas.%s, in the type's order", kind, typ.Name())
		require.Contains(t, documented, "trace", "every kind carries the order's trace")
	}
	require.Len(t, seen, len(types), "every kind is in the table")
}

// docs/protocol.md's bounds on how much of a service's answer an agent
// reads are the code's: the SDK's HTTP client's default and the built-in
// agent's, each under the name that sets it.
func TestDocumentedResponseBounds(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "protocol.md"))
	require.NoError(t, err)
	doc := strings.Join(strings.Fields(string(b)), " ")
	require.Contains(t, doc, "the SDK's HTTP client 1 MiB by default, `agent.HTTPConfig.MaxResponseBytes`")
	require.EqualValues(t, 1<<20, httpcall.DefaultMaxResponseBytes)
	_, ok := reflect.TypeOf(agent.HTTPConfig{}).FieldByName("MaxResponseBytes")
	require.True(t, ok)
	require.Contains(t, doc, "the built-in HTTP agent 128 KiB, `agenthost.MaxResponseBytes`")
	require.EqualValues(t, 128<<10, agenthost.MaxResponseBytes)
}

// docs/README.md, the docs' index, links every page of docs/.
func TestDocsIndexLinksEveryPage(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(root(t), "docs")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(dir, "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range pages {
		if name := filepath.Base(p); name != "README.md" {
			require.Contains(t, string(index), "]("+name+")", "docs/README.md does not link %s", name)
		}
	}
}

// docs/agents.md draws the retry layers with the figures the code has.
func TestDocumentedRetryLayers(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "agents.md"))
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, fmt.Sprintf("agent.HTTPConfig.Tries, default %d", httpcall.DefaultMaxTries))
	require.Contains(t, doc, fmt.Sprintf("agent.Tries, default %d", agent.DefaultTries))
	require.Contains(t, doc, fmt.Sprintf("maximumAttempts, default %d", sas.DefaultMaxAttempts))
	require.Contains(t, doc, fmt.Sprintf("`MaxDeliveries` (%d)", agenthost.DefaultMaxDeliveries))
}

// The README's layout tables name every package of the module's internal/,
// cmd/ and functions/ (a newcomer looks for the runtime there and finds the
// tooling apart), and every path they name exists.
func TestLayoutNamesEveryPackage(t *testing.T) {
	t.Parallel()
	r := root(t)
	b, err := os.ReadFile(filepath.Join(r, "README.md"))
	require.NoError(t, err)
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	require.True(t, ok, "the README has a Layout section")
	layout, _, _ = strings.Cut(layout, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:internal|cmd|functions)/[a-z0-9/]+)`").FindAllStringSubmatch(layout, -1) {
		named[strings.TrimSuffix(m[1], "/")] = true
	}
	dirs, nested := goDirs(t, r)
	var missing []string
	for dir := range dirs {
		rel, err := filepath.Rel(r, dir)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel)
		top, _, _ := strings.Cut(rel, "/")
		if (top != "internal" && top != "cmd" && top != "functions") || inNested(dir, nested) {
			continue
		}
		if !named[rel] {
			missing = append(missing, rel)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "packages the README's layout tables leave out")
	for p := range named {
		_, err := os.Stat(filepath.Join(r, p))
		require.NoError(t, err, "the layout names %s", p)
	}
}

func inNested(dir string, nested []string) bool {
	for _, n := range nested {
		if dir == n || strings.HasPrefix(dir, n+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
