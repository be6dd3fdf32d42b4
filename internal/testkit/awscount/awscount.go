// Package awscount counts, with AWS SDK middleware, every request a client
// sends (each attempt, retries included: AWS bills attempts) and, for
// DynamoDB, the capacity units the service reports it consumed, indexes
// included. Tests attach it to an aws.Config to assert the cost of an order.
package awscount

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Counter accumulates counts. Safe for concurrent use.
//
// Write units are priced by AWS's published rules, not by what an emulator
// reports: DynamoDB Local reports 4 units for a transactional write of a
// sub-1 KB item where AWS documents 2. So for TransactWriteItems the counter
// computes the units from the request (2 per KB per item, plus 1 per index
// entry a Put creates, index propagation being standard), and for single
// writes it takes the table and index units the service reports (which
// agree with AWS's rules). Both the priced and the reported totals are kept.
type Counter struct {
	mu          sync.Mutex
	requests    map[string]int // "Service.Operation" → attempts
	wcu, rcu    float64
	indexWCU    float64
	reportedWCU float64
	// IndexKeys are the attribute names an item needs to be in an index.
	IndexKeys []string
}

// Snapshot is a copy of the counts.
type Snapshot struct {
	Requests    map[string]int
	WCU         float64 // write units as AWS prices them, tables and indexes
	IndexWCU    float64 // of which on global secondary indexes
	RCU         float64
	ReportedWCU float64 // as the service (or emulator) reported them
}

// Total returns the number of requests to one service ("DynamoDB", "SQS")
// or, with "", to all.
func (s Snapshot) Total(service string) int {
	n := 0
	for k, v := range s.Requests {
		if service == "" || strings.HasPrefix(k, service+".") {
			n += v
		}
	}
	return n
}

// Sub returns s − o.
func (s Snapshot) Sub(o Snapshot) Snapshot {
	d := Snapshot{Requests: map[string]int{}, WCU: s.WCU - o.WCU, IndexWCU: s.IndexWCU - o.IndexWCU, RCU: s.RCU - o.RCU, ReportedWCU: s.ReportedWCU - o.ReportedWCU}
	for k, v := range s.Requests {
		if v -= o.Requests[k]; v != 0 {
			d.Requests[k] = v
		}
	}
	return d
}

func (s Snapshot) String() string {
	keys := make([]string, 0, len(s.Requests))
	for k := range s.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, s.Requests[k])
	}
	fmt.Fprintf(&b, "WCU=%g (index %g; reported %g) RCU=%g", s.WCU, s.IndexWCU, s.ReportedWCU, s.RCU)
	return b.String()
}

// New returns an empty counter; indexKeys name the attributes that put an
// item in a global secondary index (for pricing transactional puts).
func New(indexKeys ...string) *Counter {
	return &Counter{requests: map[string]int{}, IndexKeys: indexKeys}
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{Requests: map[string]int{}, WCU: c.wcu, IndexWCU: c.indexWCU, RCU: c.rcu, ReportedWCU: c.reportedWCU}
	for k, v := range c.requests {
		s.Requests[k] = v
	}
	return s
}

// Attach adds the counting middleware to every client made from cfg.
func (c *Counter) Attach(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, c.register)
}

func (c *Counter) register(stack *middleware.Stack) error {
	// Ask DynamoDB to report capacity (indexes included): the store never
	// asks, so the count is added here and costs nothing extra.
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("awscount.capacity",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			askCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				c.record(in.Parameters, out.Result)
			}
			return out, md, err
		}), middleware.Before); err != nil {
		return err
	}
	// Deserialize runs once per attempt, inside the retry loop.
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("awscount.requests",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			key := awsmiddleware.GetServiceID(ctx) + "." + awsmiddleware.GetOperationName(ctx)
			c.mu.Lock()
			c.requests[key]++
			c.mu.Unlock()
			return next.HandleDeserialize(ctx, in)
		}), middleware.After)
}

// record adds the capacity of one successful DynamoDB call. A failed
// conditional write also consumes capacity, but its error carries no count:
// the happy path has none, and tests of races do not assert capacity.
func (c *Counter) record(in, out any) {
	var caps []types.ConsumedCapacity
	read := false // DynamoDB Local fills in only CapacityUnits: tell reads by the operation
	switch o := out.(type) {
	case *dynamodb.PutItemOutput:
		caps = one(o.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		caps = one(o.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		caps = one(o.ConsumedCapacity)
	case *dynamodb.GetItemOutput:
		caps, read = one(o.ConsumedCapacity), true
	case *dynamodb.QueryOutput:
		caps, read = one(o.ConsumedCapacity), true
	case *dynamodb.TransactWriteItemsOutput:
		caps = o.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		caps = o.ConsumedCapacity
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var reportedTable, reportedIndex, reportedRead float64
	for _, cc := range caps {
		if read {
			reportedRead += units(cc.ReadCapacityUnits, cc.CapacityUnits, cc.WriteCapacityUnits)
			continue
		}
		c.reportedWCU += units(cc.WriteCapacityUnits, cc.CapacityUnits, cc.ReadCapacityUnits)
		for _, gsi := range cc.GlobalSecondaryIndexes {
			reportedIndex += units(gsi.WriteCapacityUnits, gsi.CapacityUnits, gsi.ReadCapacityUnits)
		}
		if cc.Table != nil {
			reportedTable += units(cc.Table.WriteCapacityUnits, cc.Table.CapacityUnits, cc.Table.ReadCapacityUnits)
		}
	}
	switch p := in.(type) {
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				c.wcu += 2 * kb(size(it.Put.Item))
				if c.indexed(it.Put.Item) {
					c.wcu++
					c.indexWCU++
				}
			case it.Update != nil, it.Delete != nil:
				c.wcu += 2 // items here are under 1 KB; index churn is not modelled
			case it.ConditionCheck != nil:
				c.wcu += 2
			}
		}
	case *dynamodb.GetItemInput, *dynamodb.QueryInput:
		c.rcu += reportedRead
	default:
		c.wcu += reportedTable + reportedIndex
		c.indexWCU += reportedIndex
	}
}

// units reads a write (or, arguments swapped, read) count from whichever
// field the service filled in.
func units(write, total, read *float64) float64 {
	if write != nil {
		return *write
	}
	return aws.ToFloat64(total) - aws.ToFloat64(read)
}

func (c *Counter) indexed(item map[string]types.AttributeValue) bool {
	if len(c.IndexKeys) == 0 {
		return false
	}
	for _, k := range c.IndexKeys {
		if _, ok := item[k]; !ok {
			return false
		}
	}
	return true
}

func kb(n int) float64 { return float64((n + 1023) / 1024) }

// size approximates DynamoDB's item size: names plus values.
func size(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return (len(x.Value)+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range x.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

func askCapacity(params any) {
	const idx = types.ReturnConsumedCapacityIndexes
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.UpdateItemInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.DeleteItemInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.GetItemInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.QueryInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.TransactWriteItemsInput:
		p.ReturnConsumedCapacity = idx
	case *dynamodb.BatchWriteItemInput:
		p.ReturnConsumedCapacity = idx
	}
}
