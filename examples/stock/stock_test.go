package stock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/stock"
	"github.com/sas-go/sas/sastest"
)

// inventory is a warehouse in memory: each hold is made at most once per
// idempotency key, and a release of a hold released already is a no-op.
type inventory struct {
	mu       sync.Mutex
	stock    map[string]int // units on the shelf, by sku
	price    map[string]int // cents a unit
	holds    map[string]stock.Hold
	held     map[string]stock.Line // what each hold id holds
	keys     []string              // the keys holds were made under, in order
	released []string              // hold ids released, in order
}

func newInventory() *inventory {
	return &inventory{
		stock: map[string]int{"apple": 10, "pear": 5, "fig": 2, "plum": 8},
		price: map[string]int{"apple": 50, "pear": 80, "fig": 120, "plum": 60},
		holds: map[string]stock.Hold{}, held: map[string]stock.Line{},
	}
}

func (inv *inventory) Hold(_ context.Context, key, sku string, qty int) (stock.Hold, error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if h, ok := inv.holds[key]; ok {
		return h, nil // the same request again: the same hold
	}
	if inv.stock[sku] < qty {
		return stock.Hold{}, stock.ErrOutOfStock
	}
	inv.stock[sku] -= qty
	h := stock.Hold{ID: fmt.Sprintf("H-%d", len(inv.holds)+1), Cents: qty * inv.price[sku]}
	inv.holds[key], inv.held[h.ID] = h, stock.Line{SKU: sku, Qty: qty}
	inv.keys = append(inv.keys, key)
	return h, nil
}

func (inv *inventory) Release(_ context.Context, _, holdID string) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if slices.Contains(inv.released, holdID) {
		return nil
	}
	l := inv.held[holdID]
	inv.stock[l.SKU] += l.Qty
	inv.released = append(inv.released, holdID)
	return nil
}

// bank charges any customer but "broke".
type bank struct {
	mu      sync.Mutex
	charged []int
}

func (b *bank) Charge(_ context.Context, _, customer string, cents int) (stock.Charge, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if customer == "broke" {
		return stock.Charge{}, stock.ErrDeclined
	}
	b.charged = append(b.charged, cents)
	return stock.Charge{ID: fmt.Sprintf("C-%d", len(b.charged)), Cents: cents}, nil
}

var basket = stock.Order{Customer: "ada", Lines: []stock.Line{{"apple", 3}, {"pear", 1}, {"fig", 2}, {"plum", 4}, {"apple", 2}}}

func setup(t *testing.T) (*sastest.Env, *inventory, *bank) {
	inv, b := newInventory(), &bank{}
	return sastest.New(t, stock.Workflows(), stock.Warehouse(inv), stock.Payments(b)), inv, b
}

// Each line is held under its own key, three at a time; the charge reads
// the holds' results, in line order, and charges their sum.
func TestEachLineIsHeldThenTheTotalCharged(t *testing.T) {
	t.Parallel()
	env, inv, b := setup(t)
	res := env.Run("order", "o-1", basket)

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.ElementsMatch(t, []string{"o-1:0:i0", "o-1:0:i1", "o-1:0:i2", "o-1:0:i3", "o-1:0:i4"}, inv.keys, "one hold per line, each its own key")
	require.Equal(t, []int{3*50 + 80 + 2*120 + 4*60 + 2*50}, b.charged)
	var holds []stock.Hold
	require.NoError(t, res.Decode("hold", &holds))
	require.Len(t, holds, 5)
	hold, _ := res.Step("hold")
	require.Len(t, hold.Elements, 5)
	for i, el := range hold.Elements {
		require.Equal(t, sastest.StateProcessed, el.State)
		var h stock.Hold
		require.NoError(t, json.Unmarshal(el.Result, &h))
		require.Equal(t, holds[i], h, "the step's result is its elements', in line order")
	}
	require.Equal(t, map[string]int{"apple": 5, "pear": 4, "fig": 0, "plum": 4}, inv.stock)
	require.Empty(t, inv.released)
}

// A line out of stock: nothing more is held, every line held is released
// (newest first, each by its own hold), the card is never charged, and an
// operator is told.
func TestALineOutOfStockReleasesTheOthers(t *testing.T) {
	t.Parallel()
	env, inv, b := setup(t)
	short := stock.Order{Customer: "ada", Lines: []stock.Line{{"apple", 1}, {"fig", 3}, {"pear", 2}, {"plum", 1}}}
	res := env.Run("order", "o-2", short)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Empty(t, b.charged)
	require.Equal(t, map[string]int{"apple": 10, "pear": 5, "fig": 2, "plum": 8}, inv.stock, "every hold released")
	require.Len(t, inv.released, len(inv.keys))
	require.Equal(t, []string{"hold: Error: element 1 failed: line 1 (fig): out of stock"}, res.Alerts)
	for i := 1; i < len(res.Undone); i++ {
		require.Greater(t, res.Undone[i-1], res.Undone[i], "released newest line first: %v", res.Undone)
	}
}

// A declined card is a business outcome: every hold is released, the
// order ends rejected, and no operator is paged.
func TestADeclinedCardReleasesEveryHold(t *testing.T) {
	t.Parallel()
	env, inv, _ := setup(t)
	res := env.Run("order", "o-3", stock.Order{Customer: "broke", Lines: basket.Lines})

	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Empty(t, res.Alerts)
	require.Equal(t, []string{"hold[4]", "hold[3]", "hold[2]", "hold[1]", "hold[0]"}, res.Undone)
	require.Equal(t, map[string]int{"apple": 10, "pear": 5, "fig": 2, "plum": 8}, inv.stock)
}

// A transient failure of one line is retried under the same key: the line
// is held once.
func TestALineRetriedIsHeldOnce(t *testing.T) {
	t.Parallel()
	env, inv, b := setup(t)
	env.FailElement("hold", 2, 1, errors.New("warehouse busy"))
	res := env.Run("order", "o-4", basket)

	require.Equal(t, sastest.StatusProcessed, res.Status)
	hold, _ := res.Step("hold")
	require.Equal(t, 2, hold.Elements[2].Attempts)
	require.Len(t, inv.keys, 5)
	require.Len(t, b.charged, 1)
}
