package dynamostore

import (
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// The guards: each condition a write is fenced on, written once and named
// after what it requires, as the pure transition in internal/sas checks it
// (storetest's GuardsMatchTheDomain holds each to its domain function).
// Every write that needs a condition takes it from here.

// absent: the item does not exist yet (Submit's puts).
const absent = "attribute_not_exists(" + attrOrderID + ")"

// claimable is sas.Claim's fence: the state seen, no holder, the attempt seen.
func claimable(u *updateExpr, from sas.ProcessState, attempt int) {
	u.cond("#st = :from AND attribute_not_exists(#lb) AND #at = :seen",
		"#st", attrState, "#lb", attrLockedBy, "#at", attrAttempt,
		":from", s(string(from)), ":seen", ni(attempt))
}

// held is the fence of the holder's writes (sas.Complete, sas.Fail): state,
// owner and attempt.
func held(u *updateExpr, state sas.ProcessState, owner string, attempt int) {
	u.cond("#st = :running AND #lb = :owner AND #at = :attempt",
		"#st", attrState, "#lb", attrLockedBy, "#at", attrAttempt,
		":running", s(string(state)), ":owner", s(owner), ":attempt", ni(attempt))
}

// later is sas.Heartbeat's fence on top of held: the new deadline is after
// the one the record has, so a repeated or older heartbeat never moves it
// back.
func later(u *updateExpr, until time.Time) {
	u.cond("#cb < :until", "#cb", attrCompleteBy, ":until", ms(until))
}

// elapsed is sas.Complete's fence of a wait step's end (Elapsed) on top
// of held: its due time (sas.DueOf: the lease, or the lease a sweep saw
// pass, WaitingSince) at or before now. A missing WaitingSince compares
// false.
func elapsed(u *updateExpr, now time.Time) {
	u.cond("#cb <= :now OR #ws <= :now", "#cb", attrCompleteBy, "#ws", attrWaitingSince, ":now", ms(now))
}

// leaseSeen is sas.Wait's fence on top of held: the deadline seen (IdxSK)
// and the attempt's first wait seen (WaitingSince, absent before it).
func leaseSeen(u *updateExpr, due, waitingSince time.Time) {
	u.cond("#due = :due", "#due", attrIdxSK, ":due", ms(due))
	if waitingSince.IsZero() {
		u.cond("attribute_not_exists(#ws)", "#ws", attrWaitingSince)
	} else {
		u.cond("#ws = :ws", "#ws", attrWaitingSince, ":ws", ms(waitingSince))
	}
}

// startsLater is sas.Start's fence on top of held: the attempt's first
// report, or one that moves its deadline later.
func startsLater(u *updateExpr, completeBy time.Time) {
	u.cond("attribute_not_exists(#sa) OR #cb < :cb", "#sa", attrStartedAt, "#cb", attrCompleteBy, ":cb", ms(completeBy))
}

// dueFrom is the supervisor's fence (sas.Rescue, sas.GiveUp): the state and
// attempt it saw, and the deadline still passed (IdxSK is CompleteBy or the
// pick-up deadline).
func dueFrom(u *updateExpr, from sas.ProcessState, attempt int, now time.Time) {
	u.cond("#st = :from AND #at = :attempt AND #due <= :now",
		"#st", attrState, "#at", attrAttempt, "#due", attrIdxSK,
		":from", s(string(from)), ":attempt", ni(attempt), ":now", ms(now))
}

// failedAt is sas.Resubmit's fence: Error at the attempt seen.
func failedAt(u *updateExpr, attempt int) {
	u.cond("#st = :error AND #at = :attempt", "#st", attrState, "#at", attrAttempt,
		":error", s(string(sas.Error)), ":attempt", ni(attempt))
}

// inState: the record is still in the state seen (Resubmit's check of each
// sibling step, so a compensation that starts meanwhile wins).
func inState(u *updateExpr, state sas.ProcessState) {
	u.cond("#st = :seen", "#st", attrState, ":seen", s(string(state)))
}

// notNoted is sas.NoteEffect's fence: the state seen, and no effect noted
// yet (a noted one is returned as it is, without a write).
func notNoted(u *updateExpr, state sas.ProcessState) {
	u.cond("#st = :seen AND (attribute_not_exists(#uo) OR #uo = :no)",
		"#st", attrState, "#uo", attrUndoOwed, ":seen", s(string(state)), ":no", boolean(false))
}

// owing is sas.Settle's fence: the state and attempt the give-up left, and
// its index entry still in the owed partition.
func owing(u *updateExpr, state sas.ProcessState, attempt int) {
	u.cond("#st = :state AND #at = :attempt AND begins_with(#pk, :owed)",
		"#st", attrState, "#at", attrAttempt, "#pk", attrIdxPK,
		":state", s(string(state)), ":attempt", ni(attempt), ":owed", s(owedPrefix))
}

// notCancelled is a forward completion's fence beside held: the step
// carries no cancel's mark (sas.Complete refuses a marked step unless its
// holder knows of the cancel).
func notCancelled(u *updateExpr) {
	u.cond("attribute_not_exists(#cx) OR #cx = :nocx", "#cx", attrCancelled, ":nocx", boolean(false))
}

// markSeen is a sibling's fence on the cancel's mark as read
// (sas.StepSeen.Cancelled): still marked, or still not.
func markSeen(u *updateExpr, cancelled bool) {
	if !cancelled {
		notCancelled(u)
		return
	}
	u.cond("#cx = :cx", "#cx", attrCancelled, ":cx", boolean(true))
}

// cancellable is sas.CancelStep's fence: the state and attempt seen, no
// holder for a Pending step, and no mark yet on a Processing one (a marked
// one is returned as it is, without a write).
func cancellable(u *updateExpr, from sas.ProcessState, attempt int) {
	u.cond("#st = :from AND #at = :seen", "#st", attrState, "#at", attrAttempt, ":from", s(string(from)), ":seen", ni(attempt))
	if from == sas.Pending {
		u.cond("attribute_not_exists(#lb)", "#lb", attrLockedBy)
		return
	}
	notCancelled(u)
}

// runningIs is an exclusive run's fence (sas.RunClaim): the schedule's
// running order is still the one read, or, read as none, there is none.
func runningIs(u *updateExpr, prev string) {
	if prev == "" {
		u.cond("attribute_not_exists(#running)", "#running", attrRunning)
		return
	}
	u.cond("#running = :prev", "#running", attrRunning, ":prev", s(prev))
}

// notLastSkipped fences a skip's count: the same run is counted once.
func notLastSkipped(u *updateExpr, orderID string) {
	u.cond("attribute_not_exists(#ls) OR #ls <> :this", "#ls", attrLastSkipped, ":this", s(orderID))
}

// fanOutNotStarted is sas.StartFanOut's fence beside held: the step has no
// count yet (fanout.go).
func fanOutNotStarted(u *updateExpr) {
	u.cond("attribute_not_exists(#fc)", "#fc", attrForEachCount)
}

// countsElement is sas.CountElement's fence: the step is a running fan-out,
// not marked by a cancel, with elements left to count.
func countsElement(u *updateExpr) {
	inState(u, sas.Processing)
	notCancelled(u)
	u.cond("#fd < #fc", "#fd", attrForEachDone, "#fc", attrForEachCount)
}
