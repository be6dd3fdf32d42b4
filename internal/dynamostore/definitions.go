package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/sas"
)

// definitionKey is where a workflow definition lives in the orders table
// (docs/state-store.md, "Workflow definitions"). '#' is not allowed in an
// order id (sas.ParseIntake), so no order can collide with it.
func definitionKey(name, version string) map[string]av {
	return map[string]av{attrOrderID: s("#definition#" + name + "#" + version)}
}

// PutDefinition writes w under its version. The item's content is a
// function of its key, so writing it again, or two schedulers writing it at
// once, changes nothing.
func (st *Store) PutDefinition(ctx context.Context, w sas.Workflow) error {
	v := w.Version()
	_, err := st.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &st.cfg.OrdersTable,
		Key:                      definitionKey(w.Name, v),
		UpdateExpression:         aws.String("SET #w = :w, #v = :v, #d = :d"),
		ExpressionAttributeNames: map[string]string{"#w": attrWorkflow, "#v": attrVersion, "#d": attrDefinition},
		ExpressionAttributeValues: map[string]av{
			":w": s(w.Name), ":v": s(v), ":d": s(string(sas.EncodeWorkflow(w))),
		},
	})
	if err != nil {
		return fmt.Errorf("storing workflow %s version %s: %w", w.Name, v, translate(err))
	}
	return nil
}

// GetDefinition reads a stored definition. The read is consistent: a
// definition is written just before the first order that names it, possibly
// by another scheduler a moment earlier.
func (st *Store) GetDefinition(ctx context.Context, name, version string) (sas.Workflow, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &st.cfg.OrdersTable, Key: definitionKey(name, version), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: %w", name, version, translate(err))
	}
	d := &decoder{item: out.Item}
	body := d.str(attrDefinition)
	if d.err != nil {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: %w", name, version, d.err)
	}
	if body == "" {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: %w", name, version, sas.ErrNotFound)
	}
	w, err := sas.DecodeWorkflow([]byte(body))
	if err != nil {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: %w", name, version, err)
	}
	if w.Name != name || w.Version() != version {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: the stored definition is %s version %s", name, version, w.Name, w.Version())
	}
	return w, nil
}
