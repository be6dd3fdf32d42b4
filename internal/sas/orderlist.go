package sas

import (
	"context"
	"time"
)

// OrderLister pages through the orders newest first, from an index of the
// orders table keyed by creation time (docs/state-store.md, "orders-created"):
// never a Scan. The operator's console lists orders with it.
type OrderLister interface {
	ListOrders(ctx context.Context, p ListOrdersParams) (ListOrdersResult, error)
}

// ListOrdersParams asks for one page of orders created in [After, Before)
// (zero: unbounded), newest first.
type ListOrdersParams struct {
	After, Before time.Time
	Limit         int    // orders on the page; 0: DefaultPageLimit
	Cursor        string // from the previous page; "" for the first
}

// WithDefaults fills in the default limit.
func (p ListOrdersParams) WithDefaults() ListOrdersParams {
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	return p
}

// ListOrdersResult is one page: orders (without their steps), newest first.
type ListOrdersResult struct {
	Orders     []Order
	NextCursor string // "" when there is no more
	Stats      ReadStats
}

// NewerFirst is the order of a ListOrders page: creation time descending,
// then order id descending (ties are rare: times are milliseconds).
func NewerFirst(a, b Order) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.OrderID > b.OrderID
}
