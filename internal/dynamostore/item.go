package dynamostore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// Attribute names; docs/state-store.md is the schema, infra/ builds it.
const (
	attrOrderID      = "OrderID"
	attrStep         = "Step"
	attrStepName     = "StepName"
	attrState        = "ProcessState"
	attrLockedBy     = "LockedBy"
	attrCompleteBy   = "CompleteBy"
	attrFailureCount = "FailureCount"
	attrAttempt      = "Attempt"
	attrShard        = "Shard"
	attrLastError    = "LastError"
	attrCreatedAt    = "CreatedAt"
	attrUpdatedAt    = "UpdatedAt"
	attrHistory      = "History"
	attrIdxPK        = "IdxPK"
	attrIdxSK        = "IdxSK"

	attrFailedBy   = "FailedBy"
	attrRefused    = "Refused"
	attrUndoOwed   = "UndoOwed"
	attrGeneration = "Generation"
	attrRejected   = "Rejected"  // sas.StepRecord.Rejected
	attrCancelled  = "Cancelled" // sas.StepRecord.Cancelled
	attrResult     = "Result"    // the step's result, compacted JSON (S)
	// A fan-out's counters on its step's record, and an element's item
	// (sas.StepRecord.ForEachCount, ForEachDone, Item; fanout.go).
	attrForEachCount = "ForEachCount"
	attrForEachDone  = "ForEachDone"
	attrItem         = "Item" // compacted JSON (S)
	// WaitingSince: see sas.StepRecord. Projected into the index, with
	// CreatedAt, because the supervisor decides from the index alone.
	attrWaitingSince = "WaitingSince"
	// StartedAt: see sas.StepRecord. Projected too: the supervisor tells a
	// request that may still be queued from an attempt that started by it.
	attrStartedAt = "StartedAt"

	attrWorkflow    = "Workflow"
	attrPayload     = "Payload"
	attrReplyTo     = "ReplyTo"
	attrPriority    = "Priority"
	attrSteps       = "Steps"
	attrContentHash = "ContentHash"
	attrVersion     = "Version"
	attrTrace       = "Trace" // the order's trace context (sas.Order.Trace)
	attrSubmitter   = "Submitter"
	attrAfter       = "After" // the order's graph (sas.Order.After), JSON; absent for a straight line
	attrDefinition  = "Definition"
)

// IndexProjection is what the state-due index projects besides the keys.
var IndexProjection = []string{attrStepName, attrState, attrLockedBy, attrCompleteBy, attrFailureCount, attrAttempt, attrUpdatedAt, attrLastError, attrShard, attrCreatedAt, attrWaitingSince, attrStartedAt}

type av = types.AttributeValue

func s(v string) av { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) av  { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }
func ni(v int) av   { return n(int64(v)) }
func ms(t time.Time) av {
	return n(t.UnixMilli())
}

func stepKey(k sas.StepKey) map[string]av {
	return map[string]av{attrOrderID: s(k.OrderID), attrStep: ni(k.Step)}
}

func historyEntry(h sas.HistoryEntry) av {
	m := map[string]av{
		"At": ms(h.At), "Actor": s(h.Actor), "To": s(string(h.To)), "Attempt": ni(h.Attempt),
	}
	if h.From != "" {
		m["From"] = s(string(h.From))
	}
	if h.Reason != "" {
		m["Reason"] = s(h.Reason)
	}
	// What the agent measured of the run, when it said (sas.RunTiming).
	if n, ok := h.Run.Queued.Milliseconds(); ok {
		m["QueuedMs"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
	}
	if n, ok := h.Run.Ran.Milliseconds(); ok {
		m["RanMs"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// millis reads an informational duration (sas.Millis): unknown when absent
// or not a non-negative integer, never a decoding error.
func millis(m map[string]av, k string) sas.Millis {
	v, ok := m[k].(*types.AttributeValueMemberN)
	if !ok {
		return sas.Millis{}
	}
	n, err := strconv.ParseUint(v.Value, 10, 64)
	if err != nil {
		return sas.Millis{}
	}
	return sas.MillisFrom(n)
}

func historyList(hs []sas.HistoryEntry) av {
	l := make([]av, len(hs))
	for i, h := range hs {
		l[i] = historyEntry(h)
	}
	return &types.AttributeValueMemberL{Value: l}
}

// stepItem encodes a whole record (for creation and rewrites).
func stepItem(r sas.StepRecord) map[string]av {
	it := stepKey(r.Key())
	it[attrStepName] = s(r.StepName)
	it[attrState] = s(string(r.ProcessState))
	it[attrFailureCount] = ni(r.FailureCount)
	it[attrAttempt] = ni(r.Attempt)
	it[attrShard] = ni(r.Shard)
	it[attrCreatedAt] = ms(r.CreatedAt)
	it[attrUpdatedAt] = ms(r.UpdatedAt)
	it[attrHistory] = historyList(r.History)
	if r.LockedBy != "" {
		it[attrLockedBy] = s(r.LockedBy)
	}
	if !r.CompleteBy.IsZero() {
		it[attrCompleteBy] = ms(r.CompleteBy)
	}
	if r.LastError != "" {
		it[attrLastError] = s(r.LastError)
	}
	if r.FailedBy != "" {
		it[attrFailedBy] = s(r.FailedBy)
	}
	if r.Refused {
		it[attrRefused] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if r.UndoOwed {
		it[attrUndoOwed] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if r.Generation != 0 {
		it[attrGeneration] = ni(r.Generation)
	}
	if r.Rejected {
		it[attrRejected] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if r.Cancelled {
		it[attrCancelled] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if len(r.Result) > 0 {
		it[attrResult] = s(string(r.Result))
	}
	if r.ForEachCount != 0 {
		it[attrForEachCount], it[attrForEachDone] = ni(r.ForEachCount), ni(r.ForEachDone)
	}
	if r.Item != nil {
		it[attrItem] = s(string(r.Item))
	}
	if !r.WaitingSince.IsZero() {
		it[attrWaitingSince] = ms(r.WaitingSince)
	}
	if !r.StartedAt.IsZero() {
		it[attrStartedAt] = ms(r.StartedAt)
	}
	if pk, at, ok := r.IndexEntry(); ok {
		it[attrIdxPK] = s(pk)
		it[attrIdxSK] = ms(at)
	}
	return it
}

func orderItem(o sas.Order) map[string]av {
	steps := make([]av, len(o.Steps))
	for i, st := range o.Steps {
		steps[i] = s(st)
	}
	it := map[string]av{
		attrOrderID:     s(o.OrderID),
		attrWorkflow:    s(o.Workflow),
		attrSteps:       &types.AttributeValueMemberL{Value: steps},
		attrContentHash: s(o.ContentHash()),
		attrCreatedAt:   ms(o.CreatedAt),
	}
	if len(o.Payload) > 0 {
		it[attrPayload] = s(string(o.Payload))
	}
	if o.ReplyTo != "" {
		it[attrReplyTo] = s(o.ReplyTo)
	}
	if o.Submitter != "" {
		it[attrSubmitter] = s(o.Submitter)
	}
	if o.Priority != 0 {
		it[attrPriority] = ni(o.Priority)
	}
	if o.Version != "" {
		it[attrVersion] = s(o.Version)
	}
	if o.Trace != "" {
		it[attrTrace] = s(o.Trace)
	}
	if o.After != nil {
		b, _ := json.Marshal(o.After) // cannot fail: ints only
		it[attrAfter] = s(string(b))
	}
	return it
}

// decoding

type decoder struct {
	item map[string]av
	err  error
}

func (d *decoder) str(k string) string {
	switch v := d.item[k].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail(k, "a string")
		return ""
	}
}

func (d *decoder) num(k string) int64 {
	switch v := d.item[k].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		x, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(k, "an integer")
		}
		return x
	default:
		d.fail(k, "a number")
		return 0
	}
}

func (d *decoder) flag(k string) bool {
	switch v := d.item[k].(type) {
	case nil:
		return false
	case *types.AttributeValueMemberBOOL:
		return v.Value
	default:
		d.fail(k, "a boolean")
		return false
	}
}

func (d *decoder) time(k string) time.Time {
	if _, ok := d.item[k]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(d.num(k)).UTC()
}

func (d *decoder) fail(k, want string) {
	if d.err == nil {
		d.err = fmt.Errorf("decoding attribute %s: not %s", k, want)
	}
}

func decodeStep(it map[string]av) (sas.StepRecord, error) {
	d := &decoder{item: it}
	r := sas.StepRecord{
		OrderID:      d.str(attrOrderID),
		Step:         int(d.num(attrStep)),
		StepName:     d.str(attrStepName),
		ProcessState: sas.ProcessState(d.str(attrState)),
		LockedBy:     d.str(attrLockedBy),
		CompleteBy:   d.time(attrCompleteBy),
		FailureCount: int(d.num(attrFailureCount)),
		Attempt:      int(d.num(attrAttempt)),
		Shard:        int(d.num(attrShard)),
		LastError:    d.str(attrLastError),
		CreatedAt:    d.time(attrCreatedAt),
		UpdatedAt:    d.time(attrUpdatedAt),
		FailedBy:     d.str(attrFailedBy),
		Refused:      d.flag(attrRefused),
		UndoOwed:     d.flag(attrUndoOwed),
		Generation:   int(d.num(attrGeneration)),
		WaitingSince: d.time(attrWaitingSince),
		StartedAt:    d.time(attrStartedAt),
		Rejected:     d.flag(attrRejected),
		Cancelled:    d.flag(attrCancelled),
	}
	if res := d.str(attrResult); res != "" {
		r.Result = json.RawMessage(res)
	}
	r.ForEachCount, r.ForEachDone = int(d.num(attrForEachCount)), int(d.num(attrForEachDone))
	if item := d.str(attrItem); item != "" {
		r.Item = json.RawMessage(item)
	}
	switch r.ProcessState {
	case sas.Pending, sas.Processing, sas.Compensating:
		r.DueAt = d.time(attrIdxSK)
	}
	decodeOwed(d, &r)
	if l, ok := it[attrHistory].(*types.AttributeValueMemberL); ok {
		for _, e := range l.Value {
			m, ok := e.(*types.AttributeValueMemberM)
			if !ok {
				d.fail(attrHistory, "a list of maps")
				break
			}
			hd := &decoder{item: m.Value}
			r.History = append(r.History, sas.HistoryEntry{
				At: hd.time("At"), Step: r.Step, Actor: hd.str("Actor"),
				From: sas.ProcessState(hd.str("From")), To: sas.ProcessState(hd.str("To")),
				Attempt: int(hd.num("Attempt")), Reason: hd.str("Reason"),
				Run: sas.RunTiming{Queued: millis(m.Value, "QueuedMs"), Ran: millis(m.Value, "RanMs")},
			})
			if hd.err != nil && d.err == nil {
				d.err = hd.err
			}
		}
	}
	if d.err == nil && !r.ProcessState.Valid() {
		d.err = fmt.Errorf("decoding step %s: unknown state %q", r.Key(), r.ProcessState)
	}
	return r, d.err
}

func decodeOrder(it map[string]av) (sas.Order, string, error) {
	d := &decoder{item: it}
	o := sas.Order{
		OrderID:   d.str(attrOrderID),
		Workflow:  d.str(attrWorkflow),
		ReplyTo:   d.str(attrReplyTo),
		Priority:  int(d.num(attrPriority)),
		Version:   d.str(attrVersion),
		CreatedAt: d.time(attrCreatedAt),
		Trace:     d.str(attrTrace),
		Submitter: d.str(attrSubmitter),
	}
	if p := d.str(attrPayload); p != "" {
		o.Payload = json.RawMessage(p)
	}
	if a := d.str(attrAfter); a != "" {
		if err := json.Unmarshal([]byte(a), &o.After); err != nil && d.err == nil {
			d.err = fmt.Errorf("decoding order %s: its graph: %w", o.OrderID, err)
		}
	}
	if l, ok := it[attrSteps].(*types.AttributeValueMemberL); ok {
		for _, e := range l.Value {
			if v, ok := e.(*types.AttributeValueMemberS); ok {
				o.Steps = append(o.Steps, v.Value)
			}
		}
	}
	return o, d.str(attrContentHash), d.err
}
