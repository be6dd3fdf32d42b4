//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/browsertest"
)

// consoleCheck is what checkConsole looks at: the deployment, and the
// orders it must find there with their state as the store holds it.
type consoleCheck struct {
	em   *emulator
	c    *cdk
	root string
	// want is every order of the run and its state in the store.
	want map[string]sas.ProcessState
	// detail is an order of several steps whose page is read (and shot).
	detail string
}

// consoleBudget bounds the console check: building sasctl (cached: a
// second or two), its start, and a handful of pages.
const consoleBudget = 2 * time.Minute

var (
	consoleURLRE = regexp.MustCompile(`the console is at (http://\S+)`)
	rowRE        = regexp.MustCompile(`(?s)<tr data-order="([^"]+)">.*?data-state="([^"]+)"`)
	pageErrRE    = regexp.MustCompile(`<p class="error">([^<]*)</p>`)
	queueErrRE   = regexp.MustCompile(`<span class="err">([^<]*)</span>`)
	nextRE       = regexp.MustCompile(`<a href="([^"]+)" id="next">`)
	orderStateRE = regexp.MustCompile(`id="order-state">([^<]+)<`)
)

// checkConsole runs `sasctl console` against the deployed stack as an
// operator does (docs/console.md): the sasctl binary, configured by the
// stack's outputs file (-outputs, -stack) and MiniStack's endpoint and
// dummy credentials, read-only. Over HTTP it reads the overview (no read
// error, both workflows, every queue's depth read), the order list (every
// order of the run, in the state the store holds) and one order's page (its
// state, and each step's queue wait and execution as the deployed agent
// reported them). Where Chromium is installed it also takes a screenshot
// of the overview and of the order (no Chromium: logged, not a failure;
// the HTTP checks are the test).
func checkConsole(ctx context.Context, t *testing.T, cc consoleCheck) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, consoleBudget)
	defer cancel()
	start := time.Now()
	runDir := cc.em.runDir
	bin := filepath.Join(runDir, "sasctl")
	if err := runProc(ctx, rig.ProcessSpec{Name: "go build sasctl", Dir: cc.root, LogPath: filepath.Join(runDir, "sasctl-build.log"),
		Argv: []string{"go", "build", "-o", bin, "./cmd/sasctl"}}); err != nil {
		t.Errorf("console: building sasctl: %v", err)
		return
	}
	logPath := filepath.Join(runDir, "sasctl-console.log")
	p, err := startProc(rig.ProcessSpec{Name: "sasctl console", Dir: runDir, Env: awsEnv(cc.em.srv.endpoint), LogPath: logPath,
		Argv: []string{bin, "-outputs", cc.c.outputsFile(), "-stack", cc.c.stack, "console", "-addr", "127.0.0.1:0", "-read-only"}})
	if err != nil {
		t.Errorf("console: starting sasctl console: %v", err)
		return
	}
	defer p.Stop(5 * time.Second)
	login, err := consoleURL(ctx, p, logPath)
	if err != nil {
		t.Errorf("console: %v; its log:\n%s", err, rig.TailFile(logPath, 30))
		return
	}
	// The printed URL carries the console's per-launch secret
	// (docs/console.md, "Who may use it"): without it, nothing.
	u, err := url.Parse(login)
	if err != nil || u.Query().Get("token") == "" {
		t.Errorf("console: the printed URL %q carries no secret (%v)", login, err)
		return
	}
	secret := u.Query().Get("token")
	base := u.Scheme + "://" + u.Host
	t.Logf("console: sasctl console on the deployment at %s", base)
	if _, err := getPage(ctx, base+"/", ""); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("console: the overview without the secret: %v, want 401", err)
	}

	// The overview.
	overview, err := getPage(ctx, base+"/", secret)
	if err != nil {
		t.Errorf("console: %v", err)
		return
	}
	for _, m := range pageErrRE.FindAllStringSubmatch(overview, -1) {
		t.Errorf("console: the overview could not read something from the deployment: %s", html.UnescapeString(m[1]))
	}
	for _, m := range queueErrRE.FindAllStringSubmatch(overview, -1) {
		t.Errorf("console: the overview could not read a queue: %s", html.UnescapeString(m[1]))
	}
	for _, wf := range []string{"order", "payment"} {
		if !strings.Contains(overview, `<a href="/orders?workflow=`+wf+`">`+wf+`</a>`) {
			t.Errorf("console: the overview has no row for the workflow %q", wf)
		}
	}
	// The deployment's queues, from its outputs (SAS_AGENT_QUEUES names
	// the agents' own), each with its depth read.
	for _, q := range []string{"<td>intake</td>", "<td>scheduler</td>", "<td>control</td>", "<td>agent "} {
		if !strings.Contains(overview, q) {
			t.Errorf("console: the overview does not list the queue %s", strings.TrimPrefix(q, "<td>"))
		}
	}

	// The order list: every order of the run, in its state, following the
	// pages (newest first, through the orders-created index).
	listed := map[string]string{}
	next := "/orders"
	for pages := 0; next != "" && pages < 10; pages++ {
		list, err := getPage(ctx, base+html.UnescapeString(next), secret)
		if err != nil {
			t.Errorf("console: %v", err)
			return
		}
		for _, m := range rowRE.FindAllStringSubmatch(list, -1) {
			listed[html.UnescapeString(m[1])] = m[2]
		}
		next = ""
		if m := nextRE.FindStringSubmatch(list); m != nil {
			next = m[1]
		}
	}
	for id, state := range cc.want {
		switch got, ok := listed[id]; {
		case !ok:
			t.Errorf("console: the order list does not show %s (it shows %d orders)", id, len(listed))
		case got != string(state):
			t.Errorf("console: the order list shows %s %s, the store %s", id, got, state)
		}
	}

	// One order's page: its state, and what its agent measured of each
	// step's run (SentTimestamp from MiniStack's event source).
	page, err := getPage(ctx, base+"/orders/"+cc.detail, secret)
	if err != nil {
		t.Errorf("console: %v", err)
		return
	}
	if m := orderStateRE.FindStringSubmatch(page); m == nil || m[1] != string(cc.want[cc.detail]) {
		t.Errorf("console: the page of %s shows the state %v, the store %s", cc.detail, m, cc.want[cc.detail])
	}
	waits := cells(page, "queue-wait")
	runs := cells(page, "execution")
	t.Logf("console: %s's steps waited %v in the queue and ran %v (then the history's outcomes)", cc.detail, waits, runs)
	if len(waits) < 3 || len(runs) < 3 {
		t.Errorf("console: the page of %s has %d queue-wait and %d execution cells, want one per step at least", cc.detail, len(waits), len(runs))
	} else {
		for i := range 3 {
			if waits[i] == "—" || runs[i] == "—" {
				t.Errorf("console: step %d of %s shows queue wait %q and execution %q: its agent's reply did not carry them", i, cc.detail, waits[i], runs[i])
			}
		}
	}

	shots(ctx, t, cc, base, login)
	t.Logf("console: checked in %s (%d orders listed)", time.Since(start).Round(100*time.Millisecond), len(listed))
}

// shots takes screenshots of the overview and the order's page into
// $SAS_E2E_SCREENSHOTS, or .rig/e2e-screenshots at the repository's root
// (not committed), where Chromium is installed.
func shots(ctx context.Context, t *testing.T, cc consoleCheck, base, login string) {
	path := browsertest.Find()
	if path == "" {
		t.Logf("console: no Chromium (set SAS_CHROMIUM or install chromium): no screenshot; the HTTP checks stand")
		return
	}
	dir := os.Getenv("SAS_E2E_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(cc.root, ".rig", "e2e-screenshots")
	}
	b := browsertest.New(t, path, dir)
	b.Run(t, chromedp.Navigate(login), chromedp.WaitVisible("#by-workflow", chromedp.ByQuery))
	b.Shot(t, "deployed-overview")
	b.Run(t, chromedp.Navigate(base+"/orders/"+cc.detail), chromedp.WaitVisible("#steps", chromedp.ByQuery))
	b.Shot(t, "deployed-order")
	b.NoDialog(t)
}

// consoleURL waits for sasctl console to say where it listens.
func consoleURL(ctx context.Context, p *rig.Process, logPath string) (string, error) {
	for {
		if f, err := os.Open(logPath); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m := consoleURLRE.FindStringSubmatch(sc.Text()); m != nil {
					f.Close()
					return m[1], nil
				}
			}
			f.Close()
		}
		if p.Exited() {
			return "", fmt.Errorf("sasctl console exited: %v", p.ExitError())
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("sasctl console never said where it listens: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// getPage reads a console page with the console's secret as a script
// would send it (Authorization: Bearer); "" sends none.
func getPage(ctx context.Context, u, secret string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// cells are the texts of the elements of class class (the step cards' and
// the history's timing cells), in page order.
func cells(page, class string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`class="(?:num )?`+class+`">([^<]*)<`).FindAllStringSubmatch(page, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}
