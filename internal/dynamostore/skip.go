package dynamostore

import (
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// skipExpr settles a step the order passes over (sas.SkipStep): fenced as
// a claim of a step never claimed (Pending, no holder, attempt 0), it
// leaves the step Skipped, out of the index, or in Error (its condition
// could not be evaluated), indexed as every Error is.
func (st *Store) skipExpr(orderID string, k sas.Skip, actor string, now time.Time) updateExpr {
	key := sas.StepKey{OrderID: orderID, Step: k.Step}
	u := newUpdate()
	claimable(&u, sas.Pending, 0)
	to := k.To()
	u.set(attrState, s(string(to)))
	if k.Failed {
		u.set(attrLastError, s(k.Reason))
		u.set(attrFailedBy, s(sas.ByCondition))
		u.set(attrRefused, boolean(true))
		st.index(&u, key, to, ms(now))
	} else {
		u.remove(attrIdxPK, attrIdxSK)
	}
	u.touch(now, sas.HistoryEntry{At: now, Step: k.Step, Actor: actor, From: sas.Pending, To: to, Reason: k.Reason})
	return u
}
