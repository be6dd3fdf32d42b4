// Package console is the operator's web console (docs/console.md): plain
// server-rendered HTML over the deployment's tables and queues, read with
// the operator's own credentials, and the operator's actions (resubmit,
// compensate, redrive a dead-letter queue, pause an agent, approve or
// reject a step that waits for people) with a dry run,
// a confirmation, progress and a list of failures. It applies the rules of
// package sasctl, and sends what it asks of the scheduler to the control
// queue (docs/trust.md). `sasctl console` serves it; `make dev` starts it.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the console reads and writes: the state store, the orders
// index and the agents' pauses (memstore and dynamostore are all three).
type Store interface {
	sas.StateStore
	sas.OrderLister
	sas.PauseStore
}

// Queues is what the console needs of SQS besides sending: depths and
// dead-letter queues (sqsqueue.Queue has both).
type Queues interface {
	sas.Queue
	sas.DepthReader
	DeadLetterQueue(ctx context.Context, url string) (string, error)
}

// QueueRef names one of the deployment's queues.
type QueueRef struct {
	Name   string   // "intake", "scheduler", "control", "agent payments", …
	Agents []string // the agents it feeds, if any
	URL    string
}

// Config configures a console.
type Config struct {
	Store  Store
	Queues Queues
	// App runs the actions with sasctl's rules; its Store and Queue are the
	// console's.
	App *sasctl.App
	// QueueRefs are the queues the overview shows and a redrive may move
	// dead letters back to.
	QueueRefs []QueueRef
	// Agents are the agents an operator may pause (the workflows' agents).
	Agents []string
	// StepAgents names each step's agents (sas.Registry.StepAgents), so an
	// order's page shows which of its steps wait for a paused agent.
	StepAgents map[string][]string
	// Registry is the deployment's workflows: with it the Waiting page
	// lists the callback steps that wait for people (optional).
	Registry sas.Registry
	// Workflows lists the workflow names for the filters (optional).
	Workflows []string
	ReadOnly  bool
	Clock     sas.Clock
	Logger    *slog.Logger
	// Refresh is how often pages poll for live updates; default 3s.
	Refresh time.Duration
	// PageSize is the rows of an order list page; default 25.
	PageSize int
	// Secret keys the CSRF token; default random per console.
	Secret []byte
	// AccessToken is the per-launch secret every request must carry
	// (auth.go): default random per console. LoginURL puts it in the URL
	// to print.
	AccessToken string
	// ControlSenders are the SQS sender ids (a role's unique id, "AROA…",
	// matching any of its sessions, or a whole SenderId) whose messages a
	// redrive may move back to the control queue: the supervisor's role and
	// the operators'. A control message from anyone else, or with no
	// sender, stays in the dead-letter queue (redrive.go).
	ControlSenders []string
	// Hosts are names besides the listener's address that requests may
	// give in Host: the name remote browsers reach a -remote console by.
	Hosts []string
	// AnyHost turns off Serve's Host check (for a console behind a proxy
	// that sets its own Host; the CSRF checks still apply).
	AnyHost bool
}

// Server is the console's HTTP handler.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	token string

	// defs finds the definition each order runs on, so that its view
	// knows which steps have an undo (sas.OrderView.Def).
	defs *sas.Definitions

	mu   sync.Mutex
	jobs map[string]*Job
	seq  int
}

// New checks the configuration and builds the handler.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Queues == nil || cfg.App == nil {
		return nil, errors.New("console: Store, Queues and App are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = sas.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 3 * time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 25
	}
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		if _, err := rand.Read(cfg.Secret); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	if cfg.AccessToken == "" {
		tok, err := newAccessToken()
		if err != nil {
			return nil, err
		}
		cfg.AccessToken = tok
	}
	mac := hmac.New(sha256.New, cfg.Secret)
	mac.Write([]byte("sas console csrf v1"))
	s := &Server{cfg: cfg, mux: http.NewServeMux(), token: hex.EncodeToString(mac.Sum(nil)), jobs: map[string]*Job{},
		defs: sas.NewDefinitions(cfg.Registry, cfg.Store)}
	if err := s.parse(); err != nil {
		return nil, err
	}
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /orders", s.orders)
	s.mux.HandleFunc("GET /orders/{id}", s.order)
	s.mux.HandleFunc("GET /order", s.order) // ?id=: the ids a path cannot carry (orderHref)
	s.mux.HandleFunc("GET /jobs/{id}", s.job)
	s.mux.HandleFunc("GET /waiting", s.waiting)
	s.mux.HandleFunc("POST /actions/{action}", s.action)
	return s, nil
}

// ServeHTTP applies the console's safety rules (the secret, then the CSRF
// checks of a state change), then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !s.authenticate(w, r) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := s.checkWrite(r); err != nil {
			s.cfg.Logger.Warn("console: refused a state-changing request", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "reason", err.Error())
			http.Error(w, "refused: "+err.Error(), http.StatusForbidden)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// checkWrite is the CSRF defence of every state-changing request: the
// console must not be read-only, the request must come from the console's
// own origin (Origin, else Referer; Sec-Fetch-Site when the browser sends
// it), and carry the console's token in its form.
func (s *Server) checkWrite(r *http.Request) error {
	if s.cfg.ReadOnly {
		return errors.New("the console is read-only")
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("a %s request", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host != "" {
			origin = ref.Scheme + "://" + ref.Host
		}
	}
	if origin == "" {
		return errors.New("no Origin or Referer")
	}
	if o, err := url.Parse(origin); err != nil || o.Host != r.Host || (o.Scheme != "http" && o.Scheme != "https") {
		return fmt.Errorf("origin %q is not this console's (%s)", origin, r.Host)
	}
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("a bad form: %w", err)
	}
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(s.token)) {
		return errors.New("a missing or wrong CSRF token")
	}
	return nil
}

func (s *Server) parse() error {
	funcs := template.FuncMap{
		"ago":      func(t time.Time) string { return ago(s.cfg.Clock.Now(), t) },
		"clock":    func(t time.Time) string { return clockTime(t) },
		"dur":      func(d time.Duration) string { return dur(d) },
		"millis":   millis,
		"outcome":  ranOutcome,
		"lower":    strings.ToLower,
		"orderURL": orderHref,
		"join":     strings.Join,
		"stateCSS": stateCSS,
		"bytes":    humanBytes,
		"add":      func(a, b int) int { return a + b },
		"list":     func(v ...string) []string { return v },
		"pct": func(a, b int) int {
			if b == 0 {
				return 100
			}
			return a * 100 / b
		},
	}
	s.pages = map[string]*template.Template{}
	for _, page := range []string{"overview", "orders", "order", "plan", "job", "error", "waiting", "decide"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return fmt.Errorf("console: parsing %s: %w", page, err)
		}
		s.pages[page] = t
	}
	return nil
}

// page is what every page's layout reads.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Refresh  int // milliseconds; 0: no live updates
	Now      time.Time
	Data     any
}

func (s *Server) render(w http.ResponseWriter, name, title string, live bool, data any) {
	p := page{Title: title, Nav: name, CSRF: s.token, ReadOnly: s.cfg.ReadOnly, Now: s.cfg.Clock.Now(), Data: data}
	if live {
		p.Refresh = int(s.cfg.Refresh / time.Millisecond)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages[name].Execute(w, p); err != nil {
		s.cfg.Logger.Error("console: rendering", "page", name, "err", err)
	}
}

func (s *Server) fail(w http.ResponseWriter, status int, err error) {
	w.WriteHeader(status)
	s.render(w, "error", "Error", false, err.Error())
}

// helpers for the templates

func stateCSS(st sas.ProcessState) string { return "st-" + strings.ToLower(string(st)) }

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + dur(-d)
	}
	return dur(d) + " ago"
}

func clockTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "–"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// millis renders what an agent measured (sas.Millis), "—" when it did not
// say: unknown is not 0.
func millis(m sas.Millis) string {
	d, ok := m.Get()
	if !ok {
		return "—"
	}
	return dur(d)
}

func humanBytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1024*1024))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// getOrder reads an order's view with the definition it runs on attached
// (sas.Definitions.Attach), so that its state reads right.
func (s *Server) getOrder(ctx context.Context, st sas.StateStore, id string) (sas.OrderView, error) {
	v, err := st.GetOrder(ctx, id)
	if err != nil {
		return v, err
	}
	return s.defs.Attach(ctx, v), nil
}
