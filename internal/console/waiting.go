package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Waiting for people (docs/console.md, "Waiting for people"): the callback
// steps that wait for a completion from outside, with approve and reject.
// The console holds no signing key, so it completes a step as an operator
// does, by naming the waiting attempt (sas.WaitingStep) on the control
// queue, through sasctl's rules (App.SendCompletion); the scheduler records
// who (the operator's role, and the console's actor) in the step's history.

// waitingRow is one step that waits for people.
type waitingRow struct {
	Order, Workflow, Name string
	Step                  int
	Wait                  sas.WaitingStep
	Since, Until          time.Time
	Payload               string
}

// waitingPage is the Waiting page's data.
type waitingPage struct {
	Rows       []waitingRow
	Next       string // a ListByState cursor; "" when there is no more
	Scanned    int    // steps in Processing read for this page
	NoRegistry bool
}

// maxWaitingScan bounds the steps in Processing one page of the Waiting
// list reads (each order read once).
const maxWaitingScan = 500

// callback reports whether step i of workflow wf, named name, is a callback
// step in the deployment's workflows.
func (s *Server) callback(wf string, i int, name string) bool {
	w, ok := s.cfg.Registry[wf]
	return ok && i >= 0 && i < len(w.Steps) && w.Steps[i].Name == name && w.Steps[i].Outside()
}

// waitingSteps lists the callback steps that wait, from the state-due
// index's steps in Processing (ListByState, never a Scan), oldest first as
// the index holds them.
func (s *Server) waitingSteps(ctx context.Context, cursor string) (waitingPage, error) {
	var p waitingPage
	if len(s.cfg.Registry) == 0 {
		p.NoRegistry = true
		return p, nil
	}
	seen := map[string]bool{}
	for {
		res, err := s.cfg.Store.ListByState(ctx, sas.ListByStateParams{State: sas.Processing, Limit: 100, Cursor: cursor})
		if err != nil {
			return p, err
		}
		for _, r := range res.Records {
			p.Scanned++
			if seen[r.OrderID] {
				continue
			}
			seen[r.OrderID] = true
			v, err := s.getOrder(ctx, s.cfg.Store, r.OrderID)
			if errors.Is(err, sas.ErrNotFound) {
				continue
			}
			if err != nil {
				return p, err
			}
			for _, st := range v.Steps {
				if st.ProcessState != sas.Processing || !s.callback(v.Order.Workflow, st.Step, st.StepName) {
					continue
				}
				p.Rows = append(p.Rows, waitingRow{Order: v.Order.OrderID, Workflow: v.Order.Workflow, Name: st.StepName, Step: st.Step,
					Wait: sas.WaitingStepOf(st), Since: st.ClaimedAt(), Until: st.CompleteBy, Payload: string(v.Order.Payload)})
			}
		}
		cursor = res.NextCursor
		if cursor == "" || p.Scanned >= maxWaitingScan {
			p.Next = cursor
			return p, nil
		}
	}
}

func (s *Server) waiting(w http.ResponseWriter, r *http.Request) {
	p, err := s.waitingSteps(r.Context(), r.URL.Query().Get("cursor"))
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	s.render(w, "waiting", "Waiting for people", true, p)
}

// waitingOf reads the attempt an approve or reject form names.
func waitingOf(form url.Values) (sas.WaitingStep, error) {
	var ws sas.WaitingStep
	ws.OrderID, ws.Holder = form.Get("order"), form.Get("holder")
	var err error
	for _, f := range []struct {
		name string
		to   *int
	}{{"step", &ws.Step}, {"attempt", &ws.Attempt}, {"generation", &ws.Generation}} {
		v := form.Get(f.name)
		if v == "" && f.name == "generation" {
			continue
		}
		if *f.to, err = strconv.Atoi(v); err != nil {
			return ws, fmt.Errorf("%s %q is not a number", f.name, v)
		}
	}
	if !sas.ValidOrderID(ws.OrderID) || ws.Holder == "" || ws.Attempt < 1 || ws.Step < 0 {
		return ws, errors.New("name the waiting step: order, step, attempt and holder (from the Waiting page)")
	}
	return ws, nil
}

// decide is an approve or a reject: without confirm, the page that says
// what it would do and asks for the result or the reason; with confirm,
// the completion sent as a job of one.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, action string, confirm bool) {
	form := r.PostForm
	ws, err := waitingOf(form)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Step: &ws, Actor: s.cfg.App.Actor}
	if action == "approve" {
		m.Outcome = sas.OutcomeDone
		if res := strings.TrimSpace(form.Get("result")); res != "" {
			m.Result = json.RawMessage(res)
		}
	} else {
		m.Outcome, m.Rejected, m.Reason = sas.OutcomeFailed, true, strings.TrimSpace(form.Get("reason"))
	}
	if !confirm {
		rec, err := s.cfg.Store.GetStep(r.Context(), sas.StepKey{OrderID: ws.OrderID, Step: ws.Step})
		if err != nil {
			s.fail(w, http.StatusBadGateway, err)
			return
		}
		s.render(w, "decide", strings.ToUpper(action[:1])+action[1:]+" "+rec.StepName, false, struct {
			Action string
			Wait   sas.WaitingStep
			Rec    sas.StepRecord
			Waits  bool
		}{action, ws, rec, rec.ProcessState == sas.Processing && sas.WaitingStepOf(rec) == ws})
		return
	}
	if m.Outcome == sas.OutcomeFailed && m.Reason == "" {
		s.fail(w, http.StatusBadRequest, errors.New("a rejection needs a reason: the submitter and the history read it"))
		return
	}
	if err := m.Check(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	target := fmt.Sprintf("%s step %d", ws.OrderID, ws.Step)
	id := s.start(action+" "+target, 1, func(ctx context.Context, done func(string, error)) {
		_, err := s.cfg.App.SendCompletion(ctx, m)
		done(target, err)
	})
	s.cfg.Logger.Info("console: "+action, "order", ws.OrderID, "step", ws.Step, "attempt", ws.Attempt, "actor", s.cfg.App.Actor)
	http.Redirect(w, r, "/jobs/"+id, http.StatusSeeOther)
}
