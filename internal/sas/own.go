package sas

import (
	"errors"
	"time"
)

// OwnWrite recognises a lost race that was won: a conditional write that
// committed, whose response was lost, and whose retry (the AWS SDK retries
// on its own) failed its condition against the very write it made. The
// refusal's current record then shows our own transition as its newest
// history entry (but a cancel's mark after it): made by actor at now, to
// state to, at attempt. A caller
// that gets ok carries on as if its write had succeeded, with the record
// returned; otherwise the race was lost to someone else (docs/protocol.md,
// "Ambiguous commits").
func OwnWrite(err error, actor string, now time.Time, to ProcessState, attempt int) (StepRecord, bool) {
	var re *RaceError
	if !errors.As(err, &re) || re.Current == nil {
		return StepRecord{}, false
	}
	cur := *re.Current
	if cur.ProcessState != to || cur.Attempt != attempt {
		return StepRecord{}, false
	}
	// A cancel's mark on a step in flight may follow our write: it moves
	// no state, attempt or holder, so the write is still ours (the
	// simulator's seed 383: a completion's successor claim, marked before
	// the completion's retry, was taken for another's and its request
	// never sent).
	for i := len(cur.History) - 1; i >= 0; i-- {
		h := cur.History[i]
		if h.Actor == actor && h.To == to && h.Attempt == attempt && h.At.UnixMilli() == now.UnixMilli() {
			return cur, true
		}
		if !h.isMark() {
			break
		}
	}
	return StepRecord{}, false
}

// OwnClaim is OwnWrite for a claim: the current record is the claim p would
// have made, held by p.Owner at the attempt after p.Attempt.
func OwnClaim(err error, p ClaimParams) (StepRecord, bool) {
	_, to, terr := p.Target()
	if terr != nil {
		return StepRecord{}, false
	}
	cur, ok := OwnWrite(err, p.Owner, p.Now, to, p.Attempt+1)
	if !ok || cur.LockedBy != p.Owner || cur.Key() != p.Key { // a sibling's race is not ours
		return StepRecord{}, false
	}
	return cur, true
}
