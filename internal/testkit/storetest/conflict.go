package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// DynamoAPI is the DynamoDB client as the DynamoDB store uses it
// (dynamostore.API, restated here: the store's tests import this package).
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Conflicting is a DynamoDB client in which another transaction on an order
// can be made to be in flight: the next TransactWriteItems that touches an
// armed order's items is cancelled as DynamoDB cancels it then
// (TransactionCanceledException, reason TransactionConflict on the item
// the other transaction holds, None on the others), and nothing is written.
// DynamoDB Local runs transactions one at a time and never answers so
// (measured: 320 concurrent transactions on two items, none cancelled), so
// this is how a test meets DynamoDB's answer, with everything else of the
// request served by DynamoDB Local.
type Conflicting struct {
	DynamoAPI
	mu    sync.Mutex
	armed map[string]int
}

// Arm makes the next n transactions touching order id conflict.
func (c *Conflicting) Arm(id string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed == nil {
		c.armed = map[string]int{}
	}
	c.armed[id] += n
}

// TransactWriteItems conflicts if armed for an order the transaction touches.
func (c *Conflicting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	conflict := -1
	for i, it := range in.TransactItems {
		if id := itemOrder(it); id != "" && c.armed[id] > 0 {
			c.armed[id]--
			conflict = i
			break
		}
	}
	c.mu.Unlock()
	if conflict < 0 {
		return c.DynamoAPI.TransactWriteItems(ctx, in, opts...)
	}
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	for i := range reasons {
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
	}
	reasons[conflict] = types.CancellationReason{Code: aws.String("TransactionConflict"),
		Message: aws.String("Transaction is ongoing for the item")}
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons"),
		CancellationReasons: reasons}
}

// itemOrder is the order id an item of a transaction names ("" if none).
func itemOrder(it types.TransactWriteItem) string {
	var key map[string]types.AttributeValue
	switch {
	case it.Update != nil:
		key = it.Update.Key
	case it.ConditionCheck != nil:
		key = it.ConditionCheck.Key
	case it.Put != nil:
		key = it.Put.Item
	case it.Delete != nil:
		key = it.Delete.Key
	}
	if v, ok := key["OrderID"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// requireConflict checks that err is a conflict, never a lost race: a
// caller told it lost a race acknowledges and moves on, and a write that
// was simply not made would then never be made (issue 29, N3).
func requireConflict(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, sas.ErrConflict)
	require.False(t, errors.Is(err, sas.ErrLostRace), "a conflict is not a lost race: %v", err)
	var re *sas.RaceError
	require.False(t, errors.As(err, &re), "no record came back: %v", err)
}

// testConflictIsNotALostRace: each write the store makes as a transaction
// (a submission, a completion with its successor's claim, an undo claim
// fenced on its siblings, a resubmit fenced on its siblings), cancelled by
// another transaction in flight on the order, is ErrConflict, writes
// nothing, and is made when tried again.
func testConflictIsNotALostRace(t *testing.T, h Harness) {
	f := h.New(t)
	if f.Conflict == nil {
		t.Skip("this store has no concurrent transactions to conflict with")
	}
	s := f.Store
	sp := sas.SubmitParams{Order: order("o-tc", 2), Now: T0, PickupBy: at(time.Minute)}
	f.Conflict("o-tc")
	_, err := s.Submit(ctx, sp)
	requireConflict(t, err)
	_, err = s.GetOrder(ctx, "o-tc")
	require.ErrorIs(t, err, sas.ErrNotFound, "nothing written")
	_, err = s.Submit(ctx, sp)
	require.NoError(t, err)

	claim(t, s, key("o-tc", 0), 0, "a", T0, at(time.Minute))
	cp := sas.CompleteParams{Key: key("o-tc", 0), Owner: "a", Attempt: 1, Now: at(time.Second),
		Next: &sas.ClaimParams{Key: key("o-tc", 1), Attempt: 0, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}}
	f.Conflict("o-tc")
	_, err = s.Complete(ctx, cp)
	requireConflict(t, err)
	v := get(t, s, "o-tc")
	require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending}, []sas.ProcessState{v.Steps[0].ProcessState, v.Steps[1].ProcessState}, "nothing written")
	_, err = s.Complete(ctx, cp)
	require.NoError(t, err)

	_, err = s.Fail(ctx, sas.FailParams{Key: key("o-tc", 1), Owner: "a", Attempt: 1, Now: at(2 * time.Second), Reason: "declined"})
	require.NoError(t, err)
	undo := sas.ClaimParams{Key: key("o-tc", 0), From: sas.Processed, Attempt: 1, Owner: "b", Now: at(3 * time.Second),
		CompleteBy: at(time.Minute), Siblings: []sas.StepSeen{{Step: 1, State: sas.Error}}}
	f.Conflict("o-tc")
	_, err = s.Claim(ctx, undo)
	requireConflict(t, err)
	require.Equal(t, sas.Processed, get(t, s, "o-tc").Steps[0].ProcessState, "nothing written")

	rp := sas.ResubmitParams{Key: key("o-tc", 1), Attempt: 1, Now: at(4 * time.Second), PickupBy: at(time.Minute), Actor: "op"}
	f.Conflict("o-tc")
	_, err = s.Resubmit(ctx, rp)
	requireConflict(t, err)
	require.Equal(t, sas.Error, get(t, s, "o-tc").Steps[1].ProcessState, "nothing written")
	got, err := s.Resubmit(ctx, rp)
	require.NoError(t, err)
	require.Equal(t, sas.Pending, got.ProcessState)
}
