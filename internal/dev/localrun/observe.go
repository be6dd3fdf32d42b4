package localrun

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/supervisor"
)

// Sweep runs one supervisor pass and keeps its report.
func (s *System) Sweep(ctx context.Context, sup *supervisor.Supervisor) supervisor.Report {
	r, err := sup.RunOnce(ctx)
	if err != nil && ctx.Err() == nil {
		s.Opts.Logger.Warn("supervisor run failed", "err", err)
	}
	s.mu.Lock()
	s.reports = append(s.reports, r)
	s.mu.Unlock()
	return r
}

// Reports returns the supervisors' reports so far.
func (s *System) Reports() []supervisor.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]supervisor.Report(nil), s.reports...)
}

// Totals adds up the supervisors' reports so far.
func (s *System) Totals() (rescued, gaveUp, lostRaces int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reports {
		rescued += r.Rescued
		gaveUp += r.GaveUp
		lostRaces += r.LostRaces
	}
	return
}

// NothingRan adds up, of the supervisors' rescues so far, the re-drives of
// steps of which no attempt ran (supervisor.Report.NothingRan).
func (s *System) NothingRan() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reports {
		n += r.NothingRan
	}
	return n
}

// Statuses drains the status queue.
func (s *System) Statuses(ctx context.Context) ([]sas.Status, error) {
	var out []sas.Status
	for {
		msgs, err := s.observer.Receive(ctx, sas.ReceiveParams{QueueURL: s.StatusQueueURL, Max: 10, Wait: 0})
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 {
			return out, nil
		}
		var receipts []string
		for _, m := range msgs {
			var st sas.Status
			if err := json.Unmarshal([]byte(m.Body), &st); err != nil {
				return out, fmt.Errorf("a status message that is not a status: %w", err)
			}
			out = append(out, st)
			receipts = append(receipts, m.Receipt)
		}
		if _, err := s.observer.Delete(ctx, sas.DeleteParams{QueueURL: s.StatusQueueURL, Receipts: receipts}); err != nil {
			return out, err
		}
	}
}

// WaitTerminal polls the store until every order is terminal (every step
// Processed, or the order settled in Error/Compensated/CompensationFailed
// with nothing in flight) or ctx ends. It returns the final views.
func (s *System) WaitTerminal(ctx context.Context, ids []string, every time.Duration) (map[string]sas.OrderView, error) {
	views := map[string]sas.OrderView{}
	pending := append([]string(nil), ids...)
	for {
		var still []string
		for _, id := range pending {
			v, err := s.observerStore.GetOrder(ctx, id)
			if err != nil && !errors.Is(err, sas.ErrNotFound) {
				return views, err
			}
			if err == nil {
				v = s.definitions.Attach(ctx, v)
				views[id] = v
				if v.Settled() {
					continue
				}
			}
			still = append(still, id)
		}
		if pending = still; len(pending) == 0 {
			return views, nil
		}
		select {
		case <-ctx.Done():
			return views, fmt.Errorf("%d orders not settled (first %s): %w", len(pending), pending[0], ctx.Err())
		case <-time.After(every):
		}
	}
}

// InFlight counts the step records the index holds as Pending (ready),
// Processing or Compensating: while any is left the run is not over. It pages
// through the sparse index, so it costs what is in flight, not the table.
func (s *System) InFlight(ctx context.Context) (int, error) {
	n := 0
	for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating} {
		cursor := ""
		for {
			page, err := s.observerStore.ListByState(ctx, sas.ListByStateParams{State: st, Cursor: cursor, Limit: 500})
			if err != nil {
				return n, fmt.Errorf("listing %s records: %w", st, err)
			}
			n += len(page.Records)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	return n, nil
}

// Views reads the orders from the store with a few readers at once; an id
// that is not in the store is absent from the map.
func (s *System) Views(ctx context.Context, ids []string) (map[string]sas.OrderView, error) {
	const readers = 8
	views := make(map[string]sas.OrderView, len(ids))
	var mu sync.Mutex
	var firstErr error
	next := make(chan string)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				v, err := s.observerStore.GetOrder(ctx, id)
				mu.Lock()
				switch {
				case err == nil:
					views[id] = s.definitions.Attach(ctx, v)
				case !errors.Is(err, sas.ErrNotFound) && firstErr == nil:
					firstErr = fmt.Errorf("reading order %s: %w", id, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		select {
		case next <- id:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return views, firstErr
}

// WaitSettled waits until every order is terminal, cheaply at scale: it
// watches the index until nothing is in flight, then reads every order, and
// keeps watching the ones not yet settled. onTick, when set, runs between
// checks (progress lines).
func (s *System) WaitSettled(ctx context.Context, ids []string, every time.Duration, onTick func(inFlight int)) (map[string]sas.OrderView, error) {
	views := map[string]sas.OrderView{}
	pending := ids
	for {
		n, err := s.InFlight(ctx)
		if err != nil && ctx.Err() == nil {
			return views, err
		}
		if onTick != nil {
			onTick(n)
		}
		if n == 0 && ctx.Err() == nil {
			got, err := s.Views(ctx, pending)
			if err != nil {
				return views, err
			}
			var still []string
			for _, id := range pending {
				v, ok := got[id]
				if ok {
					views[id] = v
				}
				if !ok || !v.Settled() {
					still = append(still, id)
				}
			}
			if pending = still; len(pending) == 0 {
				return views, nil
			}
		}
		select {
		case <-ctx.Done():
			return views, fmt.Errorf("%d orders not settled: %w", len(pending), ctx.Err())
		case <-time.After(every):
		}
	}
}

// Evidence gathers what Judge reads, for the orders given and their final
// views.
func (s *System) Evidence(ids []string, views map[string]sas.OrderView) judge.Evidence {
	s.mu.Lock()
	reg := s.Registry
	s.mu.Unlock()
	// An order submitted before a Deploy runs on its own version, which
	// the store keeps.
	defs := map[string]sas.Workflow{}
	for _, v := range views {
		o := v.Order
		key := o.Workflow + "#" + o.Version
		if w, ok := reg[o.Workflow]; o.Version == "" || (ok && w.Version() == o.Version) {
			continue
		}
		if _, done := defs[key]; done {
			continue
		}
		if w, err := s.observerStore.GetDefinition(context.Background(), o.Workflow, o.Version); err == nil {
			defs[key] = w
		}
	}
	return judge.Evidence{
		IDs: ids, Views: views, Registry: reg, Definitions: defs,
		Calls: s.Sim.CallsByKey(), Effects: s.Sim.Effects(),
		Harness: s.Injected.Of, Alerts: s.Alerts.Alerts(),
	}
}
