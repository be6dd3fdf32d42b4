package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// The agents' pauses live in one item of the state table (docs/console.md,
// "Pausing an agent"): OrderID "#pauses", Step 0, with one attribute per
// agent, "pause:<agent>", a map {PausedAt, ResumedAt, Actor}. One GetItem
// reads them all: the supervisor reads it once per sweep, each local poller
// before each receive. '#' is not allowed in an order id, the item has no
// index keys, so no order, sweep or listing ever meets it.
const (
	pausesID    = "#pauses"
	pausePrefix = "pause:"
)

var _ sas.PauseStore = (*Store)(nil)

func pausesKey() map[string]av { return stepKey(sas.StepKey{OrderID: pausesID}) }

// PauseAgent starts a pause unless one holds (the condition), so pausing
// twice keeps the first pause's start.
func (st *Store) PauseAgent(ctx context.Context, p sas.PauseParams) (sas.AgentPause, error) {
	if err := p.Check(); err != nil {
		return sas.AgentPause{}, fmt.Errorf("pausing agent: %w", err)
	}
	return st.pauseWrite(ctx, "pausing", p,
		"SET #a = :p",
		"attribute_not_exists(#a) OR attribute_exists(#a.ResumedAt)",
		map[string]av{":p": &types.AttributeValueMemberM{Value: map[string]av{
			"PausedAt": ms(p.Now), "Actor": s(p.Actor)}}})
}

// ResumeAgent ends the pause that holds, if any.
func (st *Store) ResumeAgent(ctx context.Context, p sas.PauseParams) (sas.AgentPause, error) {
	if err := p.Check(); err != nil {
		return sas.AgentPause{}, fmt.Errorf("resuming agent: %w", err)
	}
	return st.pauseWrite(ctx, "resuming", p,
		"SET #a.ResumedAt = :r, #a.Actor = :who",
		"attribute_exists(#a) AND attribute_not_exists(#a.ResumedAt)",
		map[string]av{":r": ms(p.Now), ":who": s(p.Actor)})
}

func (st *Store) pauseWrite(ctx context.Context, op string, p sas.PauseParams, update, cond string, vals map[string]av) (sas.AgentPause, error) {
	_, err := st.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &st.cfg.StateTable,
		Key:                       pausesKey(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#a": pausePrefix + p.Agent},
		ExpressionAttributeValues: vals,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return sas.AgentPause{}, fmt.Errorf("%s agent %s: %w", op, p.Agent, translate(err))
	}
	// Done, or already so: either way the pause as it now is.
	all, err := st.AgentPauses(ctx)
	if err != nil {
		return sas.AgentPause{}, fmt.Errorf("%s agent %s: %w", op, p.Agent, err)
	}
	got := all[p.Agent]
	got.Agent = p.Agent
	return got, nil
}

// AgentPauses reads the pauses item (consistently: a pause must take hold
// at the next poll).
func (st *Store) AgentPauses(ctx context.Context) (sas.Pauses, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &st.cfg.StateTable, Key: pausesKey(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("reading the agents' pauses: %w", translate(err))
	}
	ps := sas.Pauses{}
	for attr, v := range out.Item {
		name, ok := strings.CutPrefix(attr, pausePrefix)
		m, isMap := v.(*types.AttributeValueMemberM)
		if !ok || !isMap {
			continue
		}
		d := &decoder{item: m.Value}
		p := sas.AgentPause{Agent: name, PausedAt: d.time("PausedAt"), ResumedAt: d.time("ResumedAt"), Actor: d.str("Actor")}
		if d.err != nil {
			return nil, fmt.Errorf("reading the pause of agent %s: %w", name, d.err)
		}
		ps[name] = p
	}
	return ps, nil
}
