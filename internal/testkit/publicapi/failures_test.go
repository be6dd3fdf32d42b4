package publicapi

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// make test prints every failure's own lines with scripts/failures.awk,
// whatever their text: an error no pattern would have matched, a failing
// subtest's log, a panic and a build error, but nothing of a passing test.
func TestFailuresScriptPrintsEveryFailure(t *testing.T) {
	t.Parallel()
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Skip("no awk")
	}
	out, err := exec.Command(awk, "-f", filepath.Join(root(t), "scripts", "failures.awk"), filepath.Join("testdata", "go-test-v.log")).CombinedOutput()
	require.NoError(t, err, string(out))
	got := string(out)
	for _, want := range []string{
		"--- FAIL: TestOddFailure", "context line one", "stdout from the test", "something odd: no pattern matches this",
		"--- FAIL: TestOther/sub", "sub detail", "sub broke", "other log",
		"declared and not used: x", "FAIL\tft/b [build failed]",
		"--- FAIL: TestPanics", "p_test.go:3: before", "panic: assignment to entry in nil map", "/src/p_test.go:3",
	} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "fine", "a passing test's log")
}
