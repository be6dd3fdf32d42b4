package console_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/testkit/browsertest"
)

// newBrowser is a headless Chromium (internal/testkit/browsertest) saving its
// screenshots to screenshotDir. Where Chromium is missing and the test runs
// as root with apt-get, it installs Debian's package; otherwise it fails
// saying how to get one.
func newBrowser(t *testing.T) *browsertest.Browser {
	t.Helper()
	return browsertest.New(t, browsertest.Chromium(t), screenshotDir(t))
}

// screenshotDir is where the pages' screenshots go: $SAS_CONSOLE_SCREENSHOTS,
// or .rig/console-screenshots at the repository's root (not committed).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SAS_CONSOLE_SCREENSHOTS")
	if dir == "" {
		root, err := filepath.Abs("../..")
		require.NoError(t, err)
		dir = filepath.Join(root, ".rig", "console-screenshots")
	}
	return dir
}

func submitForm(sel string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).requestSubmit()`, sel), nil)
}
