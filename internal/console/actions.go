package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
)

// maxTargets bounds what one bulk action selects.
const maxTargets = 10_000

// Target is one thing an action acts on: a step to resubmit, an order to
// compensate, a message to move back from a dead-letter queue.
type Target struct {
	Order  string
	Step   int
	Name   string
	Detail string // the step's last error, the order's state
	Refuse string // why the rule refuses it ("" when it would act)
	rec    sas.StepRecord
}

// Failure is one target the action could not act on, and why.
type Failure struct {
	Target string
	Reason string
}

// Job is a running or finished action: its progress and its failures.
type Job struct {
	ID, Title    string
	Total        int
	Done         int
	Succeeded    []string
	Failures     []Failure
	Refused      int
	Finished     bool
	Started, End time.Time
}

func (s *Server) snapshot(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	c := *j
	c.Succeeded = append([]string(nil), j.Succeeded...)
	c.Failures = append([]Failure(nil), j.Failures...)
	return c, true
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	j, ok := s.snapshot(r.PathValue("id"))
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("no such job (jobs live as long as the console)"))
		return
	}
	s.render(w, "job", j.Title, !j.Finished, j)
}

// start runs f in the background as a job of total steps; f reports each
// target's outcome through the callback.
func (s *Server) start(title string, total int, f func(ctx context.Context, done func(target string, err error))) string {
	s.mu.Lock()
	s.seq++
	j := &Job{ID: strconv.Itoa(s.seq), Title: title, Total: total, Started: s.cfg.Clock.Now()}
	s.jobs[j.ID] = j
	s.mu.Unlock()
	go func() {
		ctx := context.Background()
		f(ctx, func(target string, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			j.Done++
			if err != nil {
				j.Failures = append(j.Failures, Failure{Target: target, Reason: err.Error()})
			} else if len(j.Succeeded) < 1000 {
				j.Succeeded = append(j.Succeeded, target)
			}
		})
		s.mu.Lock()
		j.Finished, j.End = true, s.cfg.Clock.Now()
		s.mu.Unlock()
	}()
	return j.ID
}

// action handles every state-changing request (ServeHTTP has checked the
// CSRF token and the origin). Without confirm=1 it renders the dry run.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	form := r.PostForm
	confirm := form.Get("confirm") == "1"
	switch a := r.PathValue("action"); a {
	case "pause", "resume":
		s.pause(w, r, a, form.Get("agent"))
	case "resubmit", "compensate", "cancel":
		targets, f, err := s.targets(r.Context(), a, form)
		if err != nil {
			s.fail(w, http.StatusBadRequest, err)
			return
		}
		if !confirm {
			s.plan(w, a, f, form, targets, "")
			return
		}
		s.runTargets(w, r, a, targets, form.Get("reason"))
	case "redrive":
		s.redrive(w, r, form.Get("queue"), confirm)
	case "approve", "reject":
		s.decide(w, r, a, confirm) // waiting.go
	default:
		s.fail(w, http.StatusNotFound, fmt.Errorf("no action %q", a))
	}
}

// targets selects what a resubmit or compensate acts on: the orders named
// by id, or every order the filter selects, and applies sasctl's rules.
func (s *Server) targets(ctx context.Context, action string, form url.Values) ([]Target, Filter, error) {
	f, err := parseFilter(form)
	if err != nil {
		return nil, f, err
	}
	var views []sas.OrderView
	if ids := form["id"]; len(ids) > 0 {
		for _, id := range ids {
			v, err := s.getOrder(ctx, s.cfg.Store, id)
			if err != nil {
				return nil, f, err
			}
			views = append(views, v)
		}
	} else {
		if f.Empty() {
			return nil, f, errors.New("select orders: name them, or give a filter (a bulk action on every order is refused)")
		}
		cursor := ""
		for len(views) < maxTargets {
			p, err := s.list(ctx, f, cursor, 100)
			if err != nil {
				return nil, f, err
			}
			for _, row := range p.Rows {
				views = append(views, sas.OrderView{Order: sas.Order{OrderID: row.ID}, Steps: row.Steps})
			}
			if cursor = p.Next; cursor == "" {
				break
			}
		}
	}
	var out []Target
	for _, v := range views {
		switch action {
		case "resubmit":
			n := 0
			for _, st := range v.Steps {
				if st.ProcessState != sas.Error {
					continue
				}
				n++
				t := Target{Order: v.Order.OrderID, Step: st.Step, Name: st.StepName, Detail: st.LastError, rec: st}
				if why := s.cfg.App.Refusal(ctx, st); why != nil {
					t.Refuse = why.Error()
				}
				out = append(out, t)
			}
			if n == 0 {
				out = append(out, Target{Order: v.Order.OrderID, Step: -1, Refuse: "no step in Error"})
			}
		case "compensate":
			// The scheduler drops a compensate while a step is in flight:
			// the dry run says so, and nothing is sent (sasctl's rule).
			out = append(out, Target{Order: v.Order.OrderID, Step: -1, Detail: string(v.State()), Refuse: sasctl.InFlight(v)})
		case "cancel":
			out = append(out, cancelTarget(v))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out, f, nil
}

func (s *Server) plan(w http.ResponseWriter, action string, f Filter, form url.Values, targets []Target, note string) {
	acting := 0
	for _, t := range targets {
		if t.Refuse == "" {
			acting++
		}
	}
	hidden := url.Values{}
	for k, vs := range form {
		if k != "csrf" && k != "confirm" {
			hidden[k] = vs
		}
	}
	var fields []struct{ K, V string }
	for _, k := range sortedKeys(hidden) {
		for _, v := range hidden[k] {
			fields = append(fields, struct{ K, V string }{k, v})
		}
	}
	s.render(w, "plan", "Dry run: "+action, false, struct {
		Action  string
		Filter  Filter
		Targets []Target
		Acting  int
		Fields  []struct{ K, V string }
		Note    string
	}{action, f, targets, acting, fields, note})
}

func (s *Server) runTargets(w http.ResponseWriter, r *http.Request, action string, targets []Target, reason string) {
	var acting []Target
	for _, t := range targets {
		if t.Refuse == "" {
			acting = append(acting, t)
		}
	}
	if reason == "" {
		reason = "requested by operator in the console"
	}
	id := s.start(fmt.Sprintf("%s %d", action, len(acting)), len(acting), func(ctx context.Context, done func(string, error)) {
		for _, t := range acting {
			switch action {
			case "resubmit":
				done(fmt.Sprintf("%s step %d (%s)", t.Order, t.Step, t.Name), s.cfg.App.ResubmitStep(ctx, t.rec))
			case "compensate":
				done(t.Order, s.cfg.App.CompensateOrder(ctx, t.Order, reason))
			case "cancel":
				said, err := s.cfg.App.CancelOrder(ctx, t.Order, reason)
				s.cfg.Logger.Info("console: cancel", "order", t.Order, "actor", s.cfg.App.Actor, "said", said, "err", err)
				done(t.Order, err)
			}
		}
	})
	s.mu.Lock()
	s.jobs[id].Refused = len(targets) - len(acting)
	s.mu.Unlock()
	http.Redirect(w, r, "/jobs/"+id, http.StatusSeeOther)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, action, agent string) {
	// sasctl's rules: the pause record, and in a deployment the event
	// source mappings of the agent's queues.
	var changed []string
	var err error
	if action == "pause" {
		_, changed, err = s.cfg.App.PauseAgent(r.Context(), agent)
	} else {
		_, changed, err = s.cfg.App.ResumeAgent(r.Context(), agent)
	}
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	s.cfg.Logger.Info("console: "+action+"d agent", "agent", agent, "actor", s.cfg.App.Actor, "mappings", changed)
	http.Redirect(w, r, "/#agents", http.StatusSeeOther)
}

// cancelTarget is a cancel's row of the dry run: what it would do to the
// order, or why it is refused (sasctl's rule, sas.CancelTargets). Of
// several branches in flight the row names the first and says how many
// the cancel marks.
func cancelTarget(v sas.OrderView) Target {
	t := Target{Order: v.Order.OrderID, Step: -1, Detail: string(v.State())}
	targets, err := sas.CancelTargets(v)
	if err != nil {
		t.Refuse = err.Error()
		return t
	}
	r := targets[0]
	t.Step, t.Name = r.Step, r.StepName
	switch flying := sas.Unmarked(targets); {
	case len(flying) > 1:
		t.Detail = fmt.Sprintf("%d steps in flight at once: the cancel marks each and takes effect when they have settled", len(flying))
	case r.ProcessState == sas.Processing:
		t.Detail = fmt.Sprintf("in flight (attempt %d): the cancel takes effect when it settles", r.Attempt)
	}
	return t
}
