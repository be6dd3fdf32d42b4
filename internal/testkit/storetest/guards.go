package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testGuardsMatchTheDomain states each transition's guard once: every
// (state, holder, owing/noted/waited, attempt seen, deadline) combination
// of every write (Resubmit, NoteEffect and Settle included) goes through the
// store and through the pure function in internal/sas, and both must give
// the same verdict (won or lost the race) and, when won, the same state,
// attempt and holder. The DynamoDB conditions are written separately from
// the pure guards; this is what holds them together.
func testGuardsMatchTheDomain(t *testing.T, h Harness) {
	f := h.New(t)
	require.NotNil(t, f.Load)
	now := at(time.Hour)
	waitedSince := now.Add(-time.Minute) // the first wait of "waited" records
	type apply struct {
		name  string
		store func(k sas.StepKey, seen int) (sas.StepRecord, error)
		pure  func(r sas.StepRecord, seen int) (sas.StepRecord, error)
	}
	var ops []apply
	for _, from := range []sas.ProcessState{sas.Pending, sas.Processed, sas.Error, sas.CompensationFailed, sas.Compensating} {
		p := func(k sas.StepKey, seen int) sas.ClaimParams {
			return sas.ClaimParams{Key: k, From: from, Attempt: seen, Owner: "w", Now: now, CompleteBy: now.Add(time.Minute)}
		}
		ops = append(ops, apply{"claim-" + string(from),
			func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Claim(ctx, p(k, seen)) },
			func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Claim(r, p(r.Key(), seen)) }})
	}
	for _, c := range []struct {
		leg   bool
		owner string // "": a writer with no lease must never win
	}{{false, "w"}, {true, "w"}, {false, ""}, {true, ""}} {
		leg, owner := c.leg, c.owner
		cp := func(k sas.StepKey, seen int) sas.CompleteParams {
			return sas.CompleteParams{Key: k, Owner: owner, Attempt: seen, Now: now, Compensation: leg}
		}
		fp := func(k sas.StepKey, seen int) sas.FailParams {
			return sas.FailParams{Key: k, Owner: owner, Attempt: seen, Now: now, Reason: "no", Compensation: leg}
		}
		ops = append(ops,
			apply{fmt.Sprintf("complete-%v-%q", leg, owner),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) {
					rs, err := f.Store.Complete(ctx, cp(k, seen))
					if err != nil {
						return sas.StepRecord{}, err
					}
					return rs[0], nil
				},
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Complete(r, cp(r.Key(), seen)) }},
			apply{fmt.Sprintf("fail-%v-%q", leg, owner),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Fail(ctx, fp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Fail(r, fp(r.Key(), seen)) }})
	}
	// A wait step's end (Elapsed): fenced on its deadline too, so a
	// record whose deadline is later than now refuses it.
	ep := func(k sas.StepKey, seen int) sas.CompleteParams {
		return sas.CompleteParams{Key: k, Owner: "w", Attempt: seen, Now: now, Elapsed: true}
	}
	ops = append(ops, apply{"complete-elapsed",
		func(k sas.StepKey, seen int) (sas.StepRecord, error) {
			rs, err := f.Store.Complete(ctx, ep(k, seen))
			if err != nil {
				return sas.StepRecord{}, err
			}
			return rs[0], nil
		},
		func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Complete(r, ep(r.Key(), seen)) }})
	for _, from := range []sas.ProcessState{sas.Processing, sas.Pending, sas.Compensating} {
		rp := func(k sas.StepKey, seen int) sas.RescueParams {
			return sas.RescueParams{Key: k, From: from, Attempt: seen, Now: now, PickupBy: now.Add(time.Minute), Actor: "sup"}
		}
		gp := func(k sas.StepKey, seen int) sas.GiveUpParams {
			return sas.GiveUpParams{Key: k, From: from, Attempt: seen, Now: now, Actor: "sup"}
		}
		lp := func(k sas.StepKey, seen int) sas.RescueParams {
			p := rp(k, seen)
			p.Lost = true
			return p
		}
		ops = append(ops,
			apply{"rescue-lost-" + string(from),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Rescue(ctx, lp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Rescue(r, lp(r.Key(), seen)) }},
			apply{"rescue-" + string(from),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Rescue(ctx, rp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Rescue(r, rp(r.Key(), seen)) }},
			apply{"giveup-" + string(from),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.GiveUp(ctx, gp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.GiveUp(r, gp(r.Key(), seen)) }})
	}
	for _, from := range []sas.ProcessState{sas.Processing, sas.Compensating} {
		for _, ws := range []time.Time{{}, waitedSince} {
			// The seen deadline is the one a passed combination carries; the
			// others hold a later one, so the fence on the deadline refuses.
			// The first wait seen is none, or the one "waited" records carry.
			wp := func(k sas.StepKey, seen int) sas.WaitParams {
				return sas.WaitParams{Key: k, From: from, Owner: "w", Attempt: seen, DueAt: now.Add(-time.Second), WaitingSince: ws,
					Now: now, Until: now.Add(time.Minute), Actor: "sup", Reason: "agent queue busy"}
			}
			ops = append(ops, apply{fmt.Sprintf("wait-%s-waited=%v", from, !ws.IsZero()),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Wait(ctx, wp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Wait(r, wp(r.Key(), seen)) }})
		}
	}
	for _, from := range []sas.ProcessState{sas.Processing, sas.Compensating} {
		for _, by := range []time.Duration{time.Minute, 2 * time.Minute} {
			// A started record's deadline is a minute on (not passed) or
			// passed: a report moving it to a minute on is a no-op for the
			// first, a write for the second; two minutes on writes both.
			sp := func(k sas.StepKey, seen int) sas.StartParams {
				return sas.StartParams{Key: k, From: from, Owner: "w", Attempt: seen, Now: now, CompleteBy: now.Add(by)}
			}
			ops = append(ops, apply{fmt.Sprintf("start-%s-%s", from, by),
				func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Start(ctx, sp(k, seen)) },
				func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Start(r, sp(r.Key(), seen)) }})
		}
	}
	for _, owner := range []string{"w", ""} {
		hp := func(k sas.StepKey, seen int) sas.HeartbeatParams {
			return sas.HeartbeatParams{Key: k, Owner: owner, Attempt: seen, Now: now, Until: now.Add(time.Hour)}
		}
		ops = append(ops, apply{fmt.Sprintf("heartbeat-%q", owner),
			func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Heartbeat(ctx, hp(k, seen)) },
			func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Heartbeat(r, hp(r.Key(), seen)) }})
	}
	rsp := func(k sas.StepKey, seen int) sas.ResubmitParams {
		return sas.ResubmitParams{Key: k, Attempt: seen, Now: now, PickupBy: now.Add(time.Minute), Actor: "op", Reason: "fixed"}
	}
	ops = append(ops, apply{"resubmit",
		func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Resubmit(ctx, rsp(k, seen)) },
		func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Resubmit(r, rsp(r.Key(), seen)) }})
	for _, state := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Error} {
		np := func(k sas.StepKey, seen int) sas.NoteEffectParams {
			return sas.NoteEffectParams{Key: k, State: state, Now: now, Actor: "sched", Attempt: seen}
		}
		ops = append(ops, apply{"noteEffect-" + string(state),
			func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.NoteEffect(ctx, np(k, seen)) },
			func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.NoteEffect(r, np(r.Key(), seen)) }})
	}
	for _, state := range []sas.ProcessState{sas.Error, sas.CompensationFailed} {
		sp := func(k sas.StepKey, seen int) sas.SettleParams {
			return sas.SettleParams{Key: k, State: state, Attempt: seen}
		}
		ops = append(ops, apply{"settle-" + string(state),
			func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Settle(ctx, sp(k, seen)) },
			func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Settle(r, sp(r.Key(), seen)) }})
	}
	for _, from := range []sas.ProcessState{sas.Processing, sas.Pending} {
		xp := func(k sas.StepKey, seen int) sas.CancelParams {
			return sas.CancelParams{Key: k, From: from, Attempt: seen, Now: now, Actor: "submitter:s", Reason: "changed my mind"}
		}
		ops = append(ops, apply{"cancel-" + string(from),
			func(k sas.StepKey, seen int) (sas.StepRecord, error) { return f.Store.Cancel(ctx, xp(k, seen)) },
			func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.CancelStep(r, xp(r.Key(), seen)) }})
	}
	cxp := func(k sas.StepKey, seen int) sas.CompleteParams {
		return sas.CompleteParams{Key: k, Owner: "w", Attempt: seen, Now: now, Cancelled: true}
	}
	ops = append(ops, apply{"complete-knowing-the-cancel",
		func(k sas.StepKey, seen int) (sas.StepRecord, error) {
			rs, err := f.Store.Complete(ctx, cxp(k, seen))
			if err != nil {
				return sas.StepRecord{}, err
			}
			return rs[0], nil
		},
		func(r sas.StepRecord, seen int) (sas.StepRecord, error) { return sas.Complete(r, cxp(r.Key(), seen)) }})

	type combo struct {
		op   int
		rec  sas.StepRecord
		seen int
		desc string
	}
	var combos []combo
	var recs []sas.StepRecord
	for oi, op := range ops {
		i := 0
		for _, st := range sas.States {
			for _, holder := range []string{"", "w", "x"} {
				if holder != "" && !st.Leased() {
					continue // only leased states carry a holder
				}
				for _, flag := range []string{"", "owing", "noted", "waited", "started", "cancelled"} {
					if (flag == "owing" && !sas.MayOwe(st)) || ((flag == "waited" || flag == "started") && holder == "") {
						continue // only a give-up's states owe; only a held lease waits or starts
					}
					for _, seen := range []int{3, 2} {
						for _, passed := range []bool{true, false} {
							due := now.Add(time.Minute)
							if passed {
								due = now.Add(-time.Second)
							}
							r := sas.StepRecord{OrderID: fmt.Sprintf("g-%s-%03d", op.name, i), StepName: "s", ProcessState: st,
								LockedBy: holder, Attempt: 3, FailureCount: 1, LastError: "earlier", CreatedAt: T0, UpdatedAt: at(time.Minute),
								History: []sas.HistoryEntry{{At: T0, Actor: "load", To: st, Attempt: 3}}}
							if st == sas.Pending || st.Leased() {
								r.DueAt = due
							}
							if holder != "" {
								r.CompleteBy = due
							}
							switch flag {
							case "owing":
								r.Owes, r.OwedAt = sas.GiveUpOwes(st), at(time.Minute)
							case "noted":
								r.UndoOwed = true
							case "waited":
								r.WaitingSince = waitedSince
							case "started":
								r.StartedAt = now.Add(-time.Minute)
							case "cancelled":
								r.Cancelled = true
							}
							r.Shard = sas.ShardFor(r.Key(), f.Shards)
							i++
							recs = append(recs, r)
							combos = append(combos, combo{op: oi, rec: r, seen: seen,
								desc: fmt.Sprintf("%s on %s holder=%q %s seen=%d passed=%v", op.name, st, holder, flag, seen, passed)})
						}
					}
				}
			}
		}
	}
	require.NoError(t, f.Load(ctx, recs))
	var wg sync.WaitGroup
	errs := make(chan string, len(combos))
	sem := make(chan struct{}, 8)
	for _, c := range combos {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			op := ops[c.op]
			want, werr := op.pure(c.rec, c.seen)
			got, gerr := op.store(c.rec.Key(), c.seen)
			switch {
			case errors.Is(werr, sas.ErrInvalid):
				if !errors.Is(gerr, sas.ErrInvalid) {
					errs <- fmt.Sprintf("%s: domain says invalid (%v), store says %v", c.desc, werr, gerr)
				}
			case (werr == nil) != (gerr == nil):
				errs <- fmt.Sprintf("%s: domain %v, store %v", c.desc, werr, gerr)
			case werr != nil && !errors.Is(gerr, sas.ErrLostRace):
				errs <- fmt.Sprintf("%s: domain lost the race, store %v", c.desc, gerr)
			case werr == nil && (want.ProcessState != got.ProcessState || want.Attempt != got.Attempt || want.LockedBy != got.LockedBy ||
				want.UndoOwed != got.UndoOwed || want.Owing() != got.Owing() || want.Generation != got.Generation ||
				!want.WaitingSince.Equal(got.WaitingSince) || !want.StartedAt.Equal(got.StartedAt) ||
				!want.CompleteBy.Equal(got.CompleteBy) || want.FailureCount != got.FailureCount || want.Cancelled != got.Cancelled):
				errs <- fmt.Sprintf("%s: domain %s/%d/%q undoOwed=%v owing=%v gen=%d waiting=%v started=%v completeBy=%v failures=%d cancelled=%v, store %s/%d/%q undoOwed=%v owing=%v gen=%d waiting=%v started=%v completeBy=%v failures=%d cancelled=%v", c.desc,
					want.ProcessState, want.Attempt, want.LockedBy, want.UndoOwed, want.Owing(), want.Generation, want.WaitingSince, want.StartedAt, want.CompleteBy, want.FailureCount, want.Cancelled,
					got.ProcessState, got.Attempt, got.LockedBy, got.UndoOwed, got.Owing(), got.Generation, got.WaitingSince, got.StartedAt, got.CompleteBy, got.FailureCount, got.Cancelled)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var bad []string
	for e := range errs {
		bad = append(bad, e)
	}
	require.Empty(t, bad, "%d of %d combinations disagree", len(bad), len(combos))
	t.Logf("%d combinations over %d transitions agree", len(combos), len(ops))
}
