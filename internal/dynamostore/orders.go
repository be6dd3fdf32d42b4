package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/sas"
)

// The orders-created index (docs/state-store.md): every order item carries
// ListPK = "orders#<shard>" and is sorted by CreatedAt, so the console pages
// through the orders newest first with one Query per shard, never a Scan.
// Workflow definitions carry no ListPK and stay out of it.
const (
	attrListPK = "ListPK"
	// DefaultOrdersIndexName is the orders-created index's name.
	DefaultOrdersIndexName = "orders-created"
)

// OrdersIndexProjection is what orders-created projects besides the keys.
var OrdersIndexProjection = []string{attrWorkflow, attrVersion, attrPriority}

var _ sas.OrderLister = (*Store)(nil)

func ordersPartition(shard int) string { return fmt.Sprintf("orders#%d", shard) }

func (st *Store) orderShard(orderID string) int {
	return sas.ShardFor(sas.StepKey{OrderID: orderID}, st.cfg.Shards)
}

// orderPos is one shard's position in a ListOrders page: the last order
// taken from it, or Done when it has nothing more.
type orderPos struct {
	At    int64  `json:"t,omitempty"`
	Order string `json:"o,omitempty"`
	Done  bool   `json:"d,omitempty"`
}

// ListOrders merges the newest Limit orders of every shard's partition and
// keeps the newest Limit overall; the cursor remembers, per shard, the last
// order it took, so the next page starts right after it. A page costs
// Shards queries of at most Limit items each.
func (st *Store) ListOrders(ctx context.Context, p sas.ListOrdersParams) (sas.ListOrdersResult, error) {
	p = p.WithDefaults()
	pos := map[int]orderPos{}
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err == nil {
			err = json.Unmarshal(b, &pos)
		}
		if err != nil {
			return sas.ListOrdersResult{}, &sas.ValidationError{Field: "cursor", Reason: "not a cursor from a previous page"}
		}
	}
	lo, hi := int64(0), int64(math.MaxInt64)
	if !p.After.IsZero() {
		lo = p.After.UnixMilli()
	}
	if !p.Before.IsZero() {
		hi = p.Before.UnixMilli() - 1
	}
	var res sas.ListOrdersResult
	heads := map[int][]sas.Order{}
	more := map[int]bool{}
	for shard := 0; shard < st.cfg.Shards; shard++ {
		at, ok := pos[shard]
		if ok && at.Done {
			continue
		}
		pk := ordersPartition(shard)
		in := &dynamodb.QueryInput{
			TableName:                 &st.cfg.OrdersTable,
			IndexName:                 &st.cfg.OrdersIndexName,
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrListPK, "#sk": attrCreatedAt},
			ExpressionAttributeValues: map[string]av{":pk": s(pk), ":lo": n(lo), ":hi": n(hi)},
			ScanIndexForward:          aws.Bool(false),
			Limit:                     aws.Int32(int32(p.Limit)),
		}
		if ok {
			in.ExclusiveStartKey = map[string]av{attrListPK: s(pk), attrCreatedAt: n(at.At), attrOrderID: s(at.Order)}
		}
		q, err := st.db.Query(ctx, in)
		if err != nil {
			return res, fmt.Errorf("listing orders in shard %d: %w", shard, translate(err))
		}
		res.Stats.Requests++
		res.Stats.ItemsRead += int(q.ScannedCount)
		for _, it := range q.Items {
			o, _, err := decodeOrder(it)
			if err != nil {
				return res, fmt.Errorf("listing orders in shard %d: %w", shard, err)
			}
			heads[shard] = append(heads[shard], o)
		}
		more[shard] = len(q.LastEvaluatedKey) > 0
	}
	// Merge: take the newest head Limit times.
	next := map[int]orderPos{}
	for shard, at := range pos {
		next[shard] = at
	}
	for len(res.Orders) < p.Limit {
		best := -1
		for shard, h := range heads {
			if len(h) > 0 && (best < 0 || sas.NewerFirst(h[0], heads[best][0])) {
				best = shard
			}
		}
		if best < 0 {
			break
		}
		o := heads[best][0]
		heads[best] = heads[best][1:]
		res.Orders = append(res.Orders, o)
		next[best] = orderPos{At: o.CreatedAt.UnixMilli(), Order: o.OrderID}
	}
	// A shard whose fetched orders were all taken and that has no more is
	// done; any other shard is resumed after its last taken order.
	left := false
	for shard := 0; shard < st.cfg.Shards; shard++ {
		if pos[shard].Done {
			continue
		}
		if len(heads[shard]) == 0 && !more[shard] {
			next[shard] = orderPos{Done: true}
			continue
		}
		left = true
	}
	if left {
		b, _ := json.Marshal(next) // ints, strings and bools
		res.NextCursor = base64.RawURLEncoding.EncodeToString(b)
	}
	return res, nil
}
