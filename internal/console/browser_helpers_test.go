package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromium finds Debian's chromium (or $SAS_CHROMIUM). Where it is
// missing and the test runs as root with apt-get, it installs the package
// as the rig installs the emulators; otherwise it fails saying how to.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SAS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	how := "install Debian's chromium (apt-get update && apt-get install -y chromium) or set SAS_CHROMIUM to a Chromium or Chrome binary"
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("no chromium on PATH: %s", how)
	}
	t.Logf("no chromium on PATH: installing Debian's package (apt-get install chromium)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing chromium failed (%v): %s\n%s", err, how, tail(string(out), 2000))
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium installed but not on PATH: %s", how)
	}
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// browser is one headless Chromium for a test, with every JavaScript
// dialog recorded (and dismissed): an alert() from an order's data is a
// script the console ran.
type browser struct {
	ctx     context.Context
	dialogs chan string
	shots   string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	// Not t.TempDir: Chromium may still write its profile for a moment
	// after it is told to stop, and TempDir's removal would fail the test.
	profile, err := os.MkdirTemp("", "sas-console-chromium-")
	require.NoError(t, err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(profile),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancel()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	b := &browser{ctx: ctx, dialogs: make(chan string, 16), shots: screenshotDir(t)}
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs <- d.Message
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	require.NoError(t, chromedp.Run(ctx), "starting chromium")
	return b
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
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// run runs actions with a generous bound: outcomes, not timing.
func (b *browser) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Run(ctx, actions...))
}

// shot saves a full-page screenshot as NAME.png.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	var png []byte
	b.run(t, chromedp.FullScreenshot(&png, 100))
	path := filepath.Join(b.shots, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
}

// waitText waits until the element's text contains want (the page's live
// updates bring it).
func (b *browser) waitText(t *testing.T, sel, want string) string {
	t.Helper()
	var got string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		err := chromedp.Run(ctx, chromedp.Text(sel, &got, chromedp.ByQuery))
		cancel()
		if err == nil && strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q (last: %q, %v)", sel, want, got, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (b *browser) noDialog(t *testing.T) {
	t.Helper()
	select {
	case m := <-b.dialogs:
		t.Fatalf("a JavaScript dialog opened (%q): the page ran a script from an order", m)
	default:
	}
}

func submitForm(sel string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).requestSubmit()`, sel), nil)
}
