package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// A schedule's state lives in one item of the orders table
// (docs/state-store.md, "Schedules"): OrderID "#schedule#<name>". '#' is not
// allowed in an order id and the item has no listing key, so no order and no
// listing ever meets it.
const (
	attrSchedName     = "Schedule"
	attrRunning       = "Running"
	attrLastRunAt     = "LastRunAt"
	attrRuns          = "Runs"
	attrSkipped       = "Skipped"
	attrLastSkipped   = "LastSkipped"
	attrLastSkippedAt = "LastSkippedAt"
)

var _ sas.ScheduleStore = (*Store)(nil)

func scheduleKey(name string) map[string]av {
	return map[string]av{attrOrderID: s("#schedule#" + name)}
}

// runStart is the schedule's part of a run's submission: one more item of
// its transaction, conditioned, for an exclusive claim, on the schedule's
// running order being the one the scheduler read (runningIs).
func (st *Store) runStart(orderID string, c *sas.RunClaim) types.TransactWriteItem {
	u := newUpdate()
	u.set(attrSchedName, s(c.Schedule))
	u.set(attrRunning, s(orderID))
	u.set(attrLastRunAt, ms(c.ScheduledAt))
	u.sets = append(u.sets, u.name(attrRuns)+" = if_not_exists("+u.name(attrRuns)+", "+u.value(ni(0))+") + "+u.value(ni(1)))
	if c.Exclusive {
		runningIs(&u, c.Prev)
	}
	in := u.itemInput(st.cfg.OrdersTable, scheduleKey(c.Schedule))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}
}

// itemInput is input for an item keyed otherwise than a step, and maybe
// unconditioned.
func (u updateExpr) itemInput(table string, key map[string]av) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       key,
		UpdateExpression:          aws.String(u.expression()),
		ExpressionAttributeNames:  u.names,
		ExpressionAttributeValues: u.values,
	}
	if u.condition != "" {
		in.ConditionExpression = aws.String(u.condition)
	}
	return in
}

func (st *Store) GetSchedule(ctx context.Context, name string) (sas.ScheduleState, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &st.cfg.OrdersTable, Key: scheduleKey(name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return sas.ScheduleState{}, fmt.Errorf("reading schedule %s: %w", name, translate(err))
	}
	if len(out.Item) == 0 {
		return sas.ScheduleState{}, fmt.Errorf("reading schedule %s: %w", name, sas.ErrNotFound)
	}
	return decodeSchedule(name, out.Item)
}

// SkipRun counts a skipped run unless it is the last one counted (the same
// trigger again), in one conditional update.
func (st *Store) SkipRun(ctx context.Context, p sas.SkipRunParams) (sas.ScheduleState, error) {
	if err := p.Check(); err != nil {
		return sas.ScheduleState{}, fmt.Errorf("skipping a run of schedule %s: %w", p.Schedule, err)
	}
	u := newUpdate()
	u.set(attrSchedName, s(p.Schedule))
	u.set(attrLastSkipped, s(p.OrderID))
	u.set(attrLastSkippedAt, ms(p.ScheduledAt))
	u.sets = append(u.sets, u.name(attrSkipped)+" = if_not_exists("+u.name(attrSkipped)+", "+u.value(ni(0))+") + "+u.value(ni(1)))
	notLastSkipped(&u, p.OrderID)
	in := u.itemInput(st.cfg.OrdersTable, scheduleKey(p.Schedule))
	in.ReturnValues = types.ReturnValueAllNew
	out, err := st.db.UpdateItem(ctx, in)
	if err != nil {
		if errors.Is(translate(err), sas.ErrLostRace) {
			return st.GetSchedule(ctx, p.Schedule) // counted already
		}
		return sas.ScheduleState{}, fmt.Errorf("skipping run %s of schedule %s: %w", p.OrderID, p.Schedule, translate(err))
	}
	return decodeSchedule(p.Schedule, out.Attributes)
}

func decodeSchedule(name string, it map[string]av) (sas.ScheduleState, error) {
	d := &decoder{item: it}
	st := sas.ScheduleState{
		Name:          name,
		Running:       d.str(attrRunning),
		LastRunAt:     d.time(attrLastRunAt),
		Runs:          int(d.num(attrRuns)),
		Skipped:       int(d.num(attrSkipped)),
		LastSkipped:   d.str(attrLastSkipped),
		LastSkippedAt: d.time(attrLastSkippedAt),
	}
	if d.err != nil {
		return sas.ScheduleState{}, fmt.Errorf("reading schedule %s: %w", name, d.err)
	}
	return st, nil
}
