// Package builtinagent is the deployment's own agent: an HTTP agent of the
// public SDK (package agent, agent.HTTP) that calls each step's action
// against one service. The assembly (internal/assembly) builds it here and
// hosts it on the SDK's handler, for the Lambda entry point
// (functions/agent), the dev server and the local runs alike, so all run
// the same agent.
//
// It is a user of the SDK like any other; what it adds is configuration
// and the fences a deployment's own agent needs (docs/trust.md):
//
//   - the agent's name and base URL, https only unless a local run or an
//     emulator says otherwise (AllowHTTP);
//   - an auth header whose value is read from a secret (Auth);
//   - the routes of the workflow registry, for requests from an older
//     scheduler that carry no action, and as a guard: a request whose
//     action is not what its workflow defines for that step of this agent
//     is refused for good and nothing is called. Whoever can write to the
//     agent's queue can name any path; only the workflows' are called.
package builtinagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
)

// The environment variables of the built-in agent that internal/config does
// not read.
const (
	// EnvName is the agent name the function serves (default "payments").
	EnvName = "SAS_AGENT_NAME"
	// EnvBaseURL is the service the agent calls; SAS_PAYMENTS_URL when
	// unset, which older deployments set.
	EnvBaseURL = "SAS_AGENT_BASE_URL"
	// EnvAllowHTTP=true lets the base URL be plain http://: for an
	// emulator or a local service only (Deps.AllowHTTP).
	EnvAllowHTTP = "SAS_AGENT_ALLOW_HTTP"
	// EnvAuthSecret is the ARN of a Secrets Manager secret or an SSM
	// SecureString parameter whose value the agent sends in its auth header
	// on every call (Deps.Auth). Never the value itself.
	EnvAuthSecret = "SAS_AGENT_AUTH_SECRET"
	// EnvAuthHeader names the auth header; DefaultAuthHeader when unset.
	EnvAuthHeader = "SAS_AGENT_AUTH_HEADER"
	// EnvRejectStatuses lists the service's 4xx statuses that are business
	// rejections ("402,422"): the order ends Rejected, with no alert
	// (Deps.RejectStatuses; agent.Agent.RejectStatuses).
	EnvRejectStatuses = "SAS_AGENT_REJECT_STATUSES"
)

// DefaultAuthHeader is the auth header's name when EnvAuthHeader is unset.
// The secret holds the whole value ("Bearer …").
const DefaultAuthHeader = "Authorization"

// Auth is a header sent on every call to the service. Its String and
// LogValue hide the value.
type Auth struct {
	Header string
	Value  string
}

func (a Auth) String() string { return a.Header + ": [hidden]" }

// LogValue keeps the value out of logs.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// reservedHeaders are set by the agent itself and may not carry the auth.
var reservedHeaders = []string{"Idempotency-Key", "Content-Type", "Accept", "Content-Length", "Host", "Transfer-Encoding", "Connection"}

// check reports what is wrong with a as a header, without its value.
func (a Auth) check() error {
	switch {
	case !validHeaderName(a.Header):
		return &sas.ValidationError{Field: EnvAuthHeader, Reason: fmt.Sprintf("%q is not a header name", a.Header)}
	case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(a.Header)):
		return &sas.ValidationError{Field: EnvAuthHeader, Reason: fmt.Sprintf("%s is set by the agent itself; name another header", http.CanonicalHeaderKey(a.Header))}
	case a.Value == "" || strings.ContainsFunc(a.Value, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return &sas.ValidationError{Field: "auth", Reason: fmt.Sprintf("the value of %s is empty or holds control characters", a.Header)}
	}
	return nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || !(r == '!' || r == '#' || r == '$' || r == '%' || r == '&' || r == '\'' || r == '*' || r == '+' ||
			r == '-' || r == '.' || r == '^' || r == '_' || r == '`' || r == '|' || r == '~' ||
			'0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}

// SecretReader reads a secret by ARN (Secrets Manager or SSM SecureString);
// awssecret.Reader is the implementation.
type SecretReader interface {
	Value(ctx context.Context, arn string) (string, error)
}

// DepsFromEnv reads the agent's own variables: its name, base URL,
// whether http is allowed, and the auth header, whose value it reads from
// the secret SAS_AGENT_AUTH_SECRET names (with secrets; not called when no
// secret is named). The caller adds the Caller and the rest.
func DepsFromEnv(ctx context.Context, getenv config.Getenv, secrets SecretReader) (Deps, error) {
	d := Deps{Name: getenv(EnvName), BaseURL: getenv(EnvBaseURL)}
	for _, f := range strings.FieldsFunc(getenv(EnvRejectStatuses), func(r rune) bool { return r == ',' || r == ' ' }) {
		st, err := strconv.Atoi(f)
		if err != nil || st < 400 || st > 499 {
			return Deps{}, fmt.Errorf("configuring the agent: %w", &sas.ValidationError{Field: EnvRejectStatuses,
				Reason: fmt.Sprintf("%q: want HTTP statuses 400-499, comma-separated", f)})
		}
		d.RejectStatuses = append(d.RejectStatuses, st)
	}
	switch v := strings.TrimSpace(getenv(EnvAllowHTTP)); v {
	case "", "false", "0":
	case "true", "1":
		d.AllowHTTP = true
	default:
		return Deps{}, fmt.Errorf("configuring the agent: %w", &sas.ValidationError{Field: EnvAllowHTTP, Reason: fmt.Sprintf("%q: want true or false", v)})
	}
	arn := strings.TrimSpace(getenv(EnvAuthSecret))
	header := strings.TrimSpace(getenv(EnvAuthHeader))
	switch {
	case arn == "" && header != "":
		return Deps{}, fmt.Errorf("configuring the agent: %w", &sas.ValidationError{Field: EnvAuthHeader, Reason: "set without " + EnvAuthSecret + ", the secret holding its value"})
	case arn == "":
		return d, nil
	case header == "":
		header = DefaultAuthHeader
	}
	if err := (Auth{Header: header, Value: "x"}).check(); err != nil {
		return Deps{}, fmt.Errorf("configuring the agent: %w", err)
	}
	if secrets == nil {
		return Deps{}, fmt.Errorf("configuring the agent: %w", &sas.ValidationError{Field: EnvAuthSecret, Reason: "no secret reader"})
	}
	v, err := secrets.Value(ctx, arn)
	if err != nil {
		return Deps{}, fmt.Errorf("configuring the agent: reading its auth header's value from %s: %w", EnvAuthSecret, err)
	}
	d.Auth = &Auth{Header: header, Value: v}
	return d, nil
}

// Deps are what the agent needs besides the configuration.
type Deps struct {
	// Client makes the HTTP calls: an *agent.HTTPClient (retries, backoff,
	// breaker, deadline), the one adapter from the HTTP caller to the SDK,
	// or a fake in tests. Required.
	Client agent.HTTPDoer
	Logger *slog.Logger // default slog.Default()
	// Registry is the workflows whose steps' routes the agent falls back on;
	// default: loaded from cfg (SAS_WORKFLOWS_FILE, or the reference ones).
	Registry sas.Registry
	// Name is the agent's name (SAS_AGENT_NAME); default "payments".
	Name string
	// BaseURL is the service's base URL (SAS_AGENT_BASE_URL); default
	// cfg.PaymentsURL (SAS_PAYMENTS_URL). https:// unless AllowHTTP.
	BaseURL string
	// AllowHTTP lets BaseURL be plain http:// (SAS_AGENT_ALLOW_HTTP=true).
	// Only local runs and emulators set it: over http the payload, the
	// idempotency key and the auth header travel in clear.
	AllowHTTP bool
	// Auth, when set, is sent on every call (SAS_AGENT_AUTH_SECRET,
	// SAS_AGENT_AUTH_HEADER; DepsFromEnv reads it).
	Auth *Auth
	// Definitions, when set, is where the agent reads the definition of an
	// earlier workflow version a request names (the scheduler stores each
	// before its first order), to check the request's action against it.
	// Without it, a request of an earlier version is held to the current
	// definition.
	Definitions sas.DefinitionStore
	// RejectStatuses are the service's answers that are business
	// rejections, not failures (SAS_AGENT_REJECT_STATUSES; see
	// agent.Agent.RejectStatuses).
	RejectStatuses []int
}

// Agent builds the HTTP agent: named d.Name, calling d.BaseURL, with the
// registry's routes for the steps that name it.
func Agent(cfg config.Config, d Deps) (*agent.Agent, error) {
	name, base := d.Name, d.BaseURL
	if name == "" {
		name = registry.PaymentsAgent
	}
	if base == "" {
		base = cfg.PaymentsURL
	}
	if base == "" {
		return nil, fmt.Errorf("configuring agent %q: %w", name,
			&sas.ValidationError{Field: "environment", Reason: EnvBaseURL + " (or SAS_PAYMENTS_URL) is required"})
	}
	if u, err := url.Parse(base); err == nil && u.Scheme == "http" && !d.AllowHTTP {
		return nil, fmt.Errorf("configuring agent %q: %w", name, &sas.ValidationError{Field: EnvBaseURL, Reason: fmt.Sprintf(
			"%q: the agent calls https:// services only; http:// is for an emulator or a local service, with %s=true", sas.Redact(base), EnvAllowHTTP)})
	}
	if d.Auth != nil {
		if err := d.Auth.check(); err != nil {
			return nil, fmt.Errorf("configuring agent %q: %w", name, err)
		}
	}
	if d.Client == nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, &sas.ValidationError{Field: "Client", Reason: "required"})
	}
	logger := d.Logger
	if logger == nil {
		logger = slog.Default()
	}
	reg := d.Registry
	if reg == nil {
		var err error
		if reg, err = registry.Load(cfg.WorkflowsFile, cfg.StepTimeout); err != nil {
			return nil, fmt.Errorf("configuring agent %q: %w", name, err)
		}
	}
	byStep, err := agenthost.RoutesFromRegistry(reg, name)
	if err != nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, err)
	}
	routes := make([]agent.Route, 0, len(byStep))
	for step, r := range byStep {
		routes = append(routes, agent.Route{Step: step, Action: r.Action, Undo: r.Undo})
	}
	slices.SortFunc(routes, func(a, b agent.Route) int { return strings.Compare(a.Step, b.Step) })
	a := agent.HTTP(name, base, withAuth(d.Client, d.Auth), routes...).Guard(onlyWorkflowActions(reg, d.Definitions, name, byStep, logger))
	if len(d.RejectStatuses) > 0 {
		a.RejectStatuses(d.RejectStatuses...)
	}
	if err := a.Err(); err != nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, err)
	}
	return a, nil
}

// onlyWorkflowActions is the agent's guard: a request that names an action
// is served only when that action is the one its workflow defines for that
// step of this agent (its undo for a compensation). The request's fields
// are not trusted (whoever can send to the agent's queue wrote them), so a
// request naming a workflow, step or action the registry does not give
// this agent is refused before anything is called. A request without an
// action (an older scheduler) passes: the HTTP agent serves it from the
// step's route, the registry's own, and refuses a step it has no route for.
//
// Workflow versions: an order keeps the definition it was submitted with
// across deploys (docs/workflows.md), and the agent knows only the
// deployment's current ones (it may not read the store, where earlier ones
// are kept). The guard holds for every version all the same: any string in
// a request's version would otherwise turn it off. A request of an earlier
// version is checked against that version's definition, read from
// definitions (the scheduler's store of them) and held to its version: a
// version no scheduler stored is no order's, and is refused. Without
// definitions (an agent function with no read on them), it is checked
// against the current definition: served when its action is unchanged (a
// version changes with any change to the workflow, and most leave this
// agent's actions as they were), refused when changed, and the reason says
// so. The agent does not verify who sent a request: the requests'
// signature is an HMAC, and an agent holding its key could sign replies
// as the scheduler (docs/trust.md, "The built-in HTTP agent").
func onlyWorkflowActions(reg sas.Registry, definitions sas.DefinitionStore, name string, byStep agenthost.Routes, log *slog.Logger) func(agent.Request) error {
	type key struct{ workflow, step string }
	steps := func(w sas.Workflow) map[string]agenthost.Route {
		out := map[string]agenthost.Route{}
		for _, s := range w.Steps {
			if s.Agent == name {
				out[s.Name] = agenthost.Route{Action: s.Action, Undo: s.Undo}
			}
		}
		return out
	}
	defined := map[key]agenthost.Route{}
	versions := map[string]string{}
	for wn, w := range reg {
		versions[wn] = w.Version()
		for s, r := range steps(w) {
			defined[key{wn, s}] = r
		}
	}
	defs := sas.NewDefinitions(reg, definitions)
	// earlierStep is the route of step in version of workflow as the
	// scheduler stored it, and whether it could be read.
	earlierStep := func(workflow, version, step string) (agenthost.Route, bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), definitionReadTimeout)
		defer cancel()
		w, _, err := defs.Get(ctx, workflow, version)
		if err != nil {
			return agenthost.Route{}, false, err
		}
		if w.Version() != version {
			return agenthost.Route{}, false, fmt.Errorf("the stored definition of workflow %s version %s is version %s", workflow, version, w.Version())
		}
		rt, ok := steps(w)[step]
		return rt, ok, nil
	}
	return func(req agent.Request) error {
		if req.Action == "" {
			return nil // served from the step's route: the registry's own
		}
		var (
			rt      agenthost.Route
			found   bool
			where   = "the workflows"
			verb    = "define"
			earlier string
		)
		current, registered := versions[req.Workflow]
		switch {
		case registered && req.Version != "" && req.Version != current && definitions != nil:
			var err error
			rt, found, err = earlierStep(req.Workflow, req.Version, req.Step)
			where, verb = fmt.Sprintf("version %s of workflow %s", quoteCut(req.Version), quoteCut(req.Workflow)), "defines"
			switch {
			case errors.Is(err, sas.ErrNotFound):
				return fmt.Errorf("workflow %s has no version %s (no scheduler stored it), so nothing was called", quoteCut(req.Workflow), quoteCut(req.Version))
			case err != nil:
				return fmt.Errorf("the definition of %s could not be read (%v), so nothing was called", where, err)
			case !found:
				return fmt.Errorf("%s has no step %s for agent %s, so nothing was called", where, quoteCut(req.Step), name)
			}
			log.Info("agent: a request of an earlier workflow version, checked against its stored definition",
				"agent", name, "order", req.OrderID, "workflow", req.Workflow, "version", req.Version, "stepName", req.Step)
		case registered && req.Version != "" && req.Version != current:
			earlier = fmt.Sprintf(" (the request names version %s of it; this agent knows the current one, %s, and calls only its actions)",
				quoteCut(req.Version), current)
			fallthrough
		case req.Workflow != "":
			rt, found = defined[key{req.Workflow, req.Step}]
			where, verb = "workflow "+quoteCut(req.Workflow), "defines"
			if !found {
				return fmt.Errorf("%s has no step %s for agent %s, so nothing was called", where, quoteCut(req.Step), name)
			}
		default:
			if rt, found = byStep[req.Step]; !found {
				return fmt.Errorf("no workflow has a step %s for agent %s, so nothing was called", quoteCut(req.Step), name)
			}
		}
		want, what := rt.Action, "action"
		if req.Undo {
			want, what = rt.Undo, "undo"
		}
		switch {
		case want == "":
			return fmt.Errorf("%s %s for step %s: %s %s no %s for it, so nothing was called",
				what, quoteCut(req.Action), quoteCut(req.Step), where, verb, what)
		case !sameAction(req.Action, want):
			return fmt.Errorf("%s %s is not what %s %s for step %s (%s)%s, so nothing was called",
				what, quoteCut(req.Action), where, verb, quoteCut(req.Step), strconv.Quote(want), earlier)
		}
		if earlier != "" {
			log.Info("agent: a request of an earlier workflow version, whose action is the current definition's",
				"agent", name, "order", req.OrderID, "workflow", req.Workflow, "version", req.Version, "stepName", req.Step)
		}
		return nil
	}
}

// definitionReadTimeout bounds the guard's read of an earlier version's
// definition (once per version and process: definitions never change).
const definitionReadTimeout = 5 * time.Second

// sameAction compares two "METHOD /path" texts field by field.
func sameAction(a, b string) bool {
	return slices.Equal(strings.Fields(a), strings.Fields(b))
}

// quoteCut quotes a value a sender wrote, cut to a length fit for a reason.
func quoteCut(s string) string {
	const maxQuoted = 120
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + fmt.Sprintf("… [%d bytes]", len(s))
	}
	return strconv.Quote(s)
}

// withAuth is c adding the auth header, when there is one, to every call.
func withAuth(c agent.HTTPDoer, auth *Auth) agent.HTTPDoer {
	if auth == nil {
		return c
	}
	return authDoer{next: c, auth: *auth}
}

// authDoer adds the auth header to a call's own, on a copy: the caller's
// header is not changed.
type authDoer struct {
	next agent.HTTPDoer
	auth Auth
}

func (d authDoer) Do(ctx context.Context, call agent.HTTPCall) (agent.HTTPResponse, error) {
	call.Header = call.Header.Clone()
	if call.Header == nil {
		call.Header = http.Header{}
	}
	call.Header.Set(d.auth.Header, d.auth.Value)
	return d.next.Do(ctx, call)
}
