package console

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// QueueView is one queue on the overview.
type QueueView struct {
	QueueRef
	Depth    sas.QueueDepth
	DLQ      string
	DLQDepth sas.QueueDepth
	Paused   bool
	Err      string
}

// AgentView is one agent and its pause.
type AgentView struct {
	Name  string
	Pause sas.AgentPause
}

// WorkflowCount counts recent orders of one workflow version by state.
type WorkflowCount struct {
	Workflow, Version string
	ByState           map[sas.ProcessState]int
}

// Overview is the overview page's data.
type Overview struct {
	Steps       map[sas.ProcessState]int // indexed step records by state
	StepStates  []sas.ProcessState
	Capped      bool
	Stuck       []sas.StepRecord // oldest deadline first
	Failures    []sas.StepRecord // newest first
	Queues      []QueueView
	Agents      []AgentView
	Recent      []WorkflowCount
	RecentN     int
	OrderStates []sas.ProcessState
	Throughput  int // of the recent sample, orders created in the last hour
	Errors      []string
}

// overviewCap bounds the records counted per state; recentSample the
// orders read for the per-workflow table.
const (
	overviewCap  = 2000
	recentSample = 50
)

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	s.render(w, "overview", "Overview", true, s.buildOverview(r.Context()))
}

func (s *Server) buildOverview(ctx context.Context) Overview {
	now := s.cfg.Clock.Now()
	o := Overview{Steps: map[sas.ProcessState]int{},
		StepStates:  []sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating, sas.Error, sas.CompensationFailed},
		OrderStates: sas.OrderStates}
	fail := func(err error) { o.Errors = append(o.Errors, err.Error()) }
	for _, st := range o.StepStates {
		cursor := ""
		for {
			page, err := s.cfg.Store.ListByState(ctx, sas.ListByStateParams{State: st, Limit: 200, Cursor: cursor})
			if err != nil {
				fail(err)
				break
			}
			o.Steps[st] += len(page.Records)
			for _, rec := range page.Records {
				if sas.Due(rec, now) {
					o.Stuck = append(o.Stuck, rec)
				}
				if st == sas.Error || st == sas.CompensationFailed {
					o.Failures = append(o.Failures, rec)
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
			if o.Steps[st] >= overviewCap {
				o.Capped = true
				break
			}
		}
	}
	sort.SliceStable(o.Stuck, func(i, j int) bool { return o.Stuck[i].DueAt.Before(o.Stuck[j].DueAt) })
	o.Stuck = o.Stuck[:min(len(o.Stuck), 10)]
	sort.SliceStable(o.Failures, func(i, j int) bool { return o.Failures[i].UpdatedAt.After(o.Failures[j].UpdatedAt) })
	o.Failures = o.Failures[:min(len(o.Failures), 10)]

	pauses, err := s.cfg.Store.AgentPauses(ctx)
	if err != nil {
		fail(err)
	}
	for _, a := range s.cfg.Agents {
		o.Agents = append(o.Agents, AgentView{Name: a, Pause: pauses[a]})
	}
	for _, q := range s.cfg.QueueRefs {
		v := QueueView{QueueRef: q, Paused: pauses.Paused(q.Agents...)}
		if v.Depth, err = s.cfg.Queues.Depth(ctx, q.URL); err != nil {
			v.Err = err.Error()
		} else if v.DLQ, err = s.cfg.Queues.DeadLetterQueue(ctx, q.URL); err != nil {
			v.Err = err.Error()
		} else if v.DLQ != "" {
			if v.DLQDepth, err = s.cfg.Queues.Depth(ctx, v.DLQ); err != nil {
				v.Err = err.Error()
			}
		}
		o.Queues = append(o.Queues, v)
	}

	res, err := s.cfg.Store.ListOrders(ctx, sas.ListOrdersParams{Limit: recentSample})
	if err != nil {
		fail(err)
	}
	counts := map[[2]string]*WorkflowCount{}
	for _, ord := range res.Orders {
		v, err := s.getOrder(ctx, s.cfg.Store, ord.OrderID)
		if err != nil {
			continue
		}
		o.RecentN++
		if now.Sub(ord.CreatedAt) <= time.Hour {
			o.Throughput++
		}
		k := [2]string{ord.Workflow, ord.Version}
		c := counts[k]
		if c == nil {
			c = &WorkflowCount{Workflow: ord.Workflow, Version: ord.Version, ByState: map[sas.ProcessState]int{}}
			counts[k] = c
		}
		c.ByState[v.State()]++
	}
	for _, c := range counts {
		o.Recent = append(o.Recent, *c)
	}
	sort.Slice(o.Recent, func(i, j int) bool {
		if o.Recent[i].Workflow != o.Recent[j].Workflow {
			return o.Recent[i].Workflow < o.Recent[j].Workflow
		}
		return o.Recent[i].Version < o.Recent[j].Version
	})
	return o
}
