package checkout_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/checkout"
	"github.com/sas-go/sas/sastest"
)

// provider is a fake payment provider: it keeps each payment's newest
// token, and its webhook (settle) answers it through the kit.
type provider struct {
	mu       sync.Mutex
	env      *sastest.Env
	tokens   map[string]string // key -> newest token
	refunded []string
	// now: the webhook fires inside Start, before the agent's answer.
	now     *sastest.Answer
	outages int // Start calls that fail transiently first
}

func (p *provider) Start(_ context.Context, key string, _ int, token string) error {
	p.mu.Lock()
	if p.outages > 0 {
		p.outages--
		p.mu.Unlock()
		return errors.New("provider unavailable")
	}
	p.tokens[key] = token
	now := p.now
	p.mu.Unlock()
	if now != nil {
		p.env.Complete(token, *now)
	}
	return nil
}

func (p *provider) Refund(_ context.Context, key string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunded = append(p.refunded, strings.TrimSuffix(key, ":undo"))
	return nil
}

// settle is the provider's webhook for the payment under key.
func (p *provider) settle(key string, a sastest.Answer) {
	p.mu.Lock()
	tok := p.tokens[key]
	p.mu.Unlock()
	p.env.Complete(tok, a)
}

type warehouse struct {
	mu       sync.Mutex
	held     map[string]string
	shipped  map[string]string // sku -> payment id
	released int
}

func (w *warehouse) Reserve(_ context.Context, key, sku string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held[key] = sku
	return nil
}

func (w *warehouse) Release(_ context.Context, key string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.held, strings.TrimSuffix(key, ":undo"))
	w.released++
	return nil
}

func (w *warehouse) Ship(_ context.Context, _ string, sku, paymentID string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shipped[sku] = paymentID
	return nil
}

func setup(t *testing.T) (*sastest.Env, *provider, *warehouse) {
	p := &provider{tokens: map[string]string{}}
	w := &warehouse{held: map[string]string{}, shipped: map[string]string{}}
	env := sastest.New(t, checkout.Workflows(), checkout.Payments(p), checkout.Stock(w))
	p.env = env
	return env, p, w
}

// The provider's webhook comes before the agent's own answer: the payment
// completes once, its id (the webhook's, not the agent's) reaches the
// shipment.
func TestTheWebhookConfirmsThePayment(t *testing.T) {
	t.Parallel()
	env, p, w := setup(t)
	p.now = &sastest.Answer{Result: checkout.Payment{ID: "pay-1"}}
	res := env.Run("checkout", "c-1", checkout.Cart{SKU: "mug", Amount: 12})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, map[string]string{"mug": "pay-1"}, w.shipped)
	require.JSONEq(t, `{"paymentId":"pay-1"}`, string(res.Results["pay"]))
	require.Empty(t, p.refunded)
}

// The provider was down for the first attempt: the retry brings a new
// token, and the webhook with it confirms the payment.
func TestARetriedPaymentIsConfirmedByItsNewToken(t *testing.T) {
	t.Parallel()
	env, p, w := setup(t)
	p.outages = 3 // the agent's tries of the first attempt
	p.now = &sastest.Answer{Result: checkout.Payment{ID: "pay-2"}}
	res := env.Run("checkout", "c-2", checkout.Cart{SKU: "cup", Amount: 5})
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, "pay-2", w.shipped["cup"])
	pay, ok := res.Step("pay")
	require.True(t, ok)
	require.Equal(t, 2, pay.Attempts, "the first attempt failed, the second was confirmed")
}

// Declined by the provider: the order ends Rejected, the payment refunded
// (it may have started) and the stock released; nobody is paged.
func TestADeclinedPaymentIsRefundedAndReleased(t *testing.T) {
	t.Parallel()
	env, p, w := setup(t)
	p.now = &sastest.Answer{Fail: "card declined", Reject: true}
	res := env.Run("checkout", "c-3", checkout.Cart{SKU: "pan", Amount: 40})
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{"c-3:1"}, p.refunded)
	require.Empty(t, w.held)
	require.Empty(t, w.shipped)
	require.Empty(t, res.Alerts)
}

// No webhook within a day: the payment is given up (an operator alerted),
// refunded and the stock released; a webhook after that changes nothing.
func TestAPaymentNeverConfirmedIsGivenUp(t *testing.T) {
	t.Parallel()
	env, p, w := setup(t)
	res := env.Run("checkout", "c-4", checkout.Cart{SKU: "pot", Amount: 30})
	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"c-4:1"}, p.refunded)
	require.Empty(t, w.held)
	require.NotEmpty(t, res.Alerts)

	p.settle("c-4:1", sastest.Answer{Result: checkout.Payment{ID: "late"}})
	res = env.Settle("c-4")
	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Empty(t, w.shipped)
}
