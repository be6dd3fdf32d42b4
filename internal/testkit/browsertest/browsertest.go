// Package browsertest drives a headless Chromium for tests (chromedp over
// the DevTools protocol): the console's browser test (internal/console)
// and the deploy-and-run suite's look at the console on a deployment
// (e2e). Only tests import it.
package browsertest

import (
	"context"
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

// Find is Chromium's path: $SAS_CHROMIUM, else chromium or
// chromium-browser on PATH; "" when there is none.
func Find() string {
	if p := os.Getenv("SAS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Chromium is Find, or, where it finds none and the test runs as root with
// apt-get, Debian's chromium installed as the rig installs the emulators;
// otherwise the test fails saying how to get one.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := Find(); p != "" {
		return p
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

// Browser is one headless Chromium for a test, with every JavaScript
// dialog recorded (and dismissed): an alert() from an order's data is a
// script the page ran.
type Browser struct {
	ctx     context.Context
	dialogs chan string
	shots   string
}

// New starts the Chromium at path (Chromium, Find) for t, saving its
// screenshots to shots (created); it stops when t ends.
func New(t testing.TB, path, shots string) *Browser {
	t.Helper()
	require.NoError(t, os.MkdirAll(shots, 0o755))
	// Not t.TempDir: Chromium may still write its profile for a moment
	// after it is told to stop, and TempDir's removal would fail the test.
	profile, err := os.MkdirTemp("", "sas-chromium-")
	require.NoError(t, err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
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
	b := &Browser{ctx: ctx, dialogs: make(chan string, 16), shots: shots}
	chromedp.ListenTarget(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs <- d.Message
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	require.NoError(t, chromedp.Run(ctx), "starting chromium")
	return b
}

// Run runs actions with a generous bound: outcomes, not timing.
func (b *Browser) Run(t testing.TB, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Run(ctx, actions...))
}

// Shot saves a full-page screenshot as NAME.png in the screenshots'
// directory and returns its path.
//
// Chromium's capture now and then never answers on a busy machine (seen
// once in CI beside a simulator sweep: a full-page capture of a page with
// live updates was still pending after 90 s, while the next subtests'
// captures took a second; chromedp/chromedp#1339 reports the same, in
// Chromium). So each capture has its own bound and is tried again, the
// last time of the viewport only (no resize beyond it): three tries within
// the 90 s that Run allows. A page that never renders still fails t.
func (b *Browser) Shot(t testing.TB, name string) string {
	t.Helper()
	var png []byte
	tries := []chromedp.Action{chromedp.FullScreenshot(&png, 100), chromedp.FullScreenshot(&png, 100), chromedp.CaptureScreenshot(&png)}
	var err error
	for i, capture := range tries {
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		err = chromedp.Run(ctx, capture)
		cancel()
		if err == nil {
			break
		}
		t.Logf("screenshot %s, try %d of %d: %v", name, i+1, len(tries), err)
	}
	require.NoError(t, err, "screenshot %s", name)
	path := filepath.Join(b.shots, name+".png")
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot %s", path)
	return path
}

// WaitText waits until the element's text contains want (a page's live
// updates bring it), and returns the text.
func (b *Browser) WaitText(t testing.TB, sel, want string) string {
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

// NoDialog fails t if a JavaScript dialog opened.
func (b *Browser) NoDialog(t testing.TB) {
	t.Helper()
	select {
	case m := <-b.dialogs:
		t.Fatalf("a JavaScript dialog opened (%q): the page ran a script from an order", m)
	default:
	}
}
