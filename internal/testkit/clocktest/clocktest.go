// Package clocktest is a fake sas.Clock for tests: time stands still until
// the test (or a hook it installs) moves it, so that deadlines pass when the
// test says and nothing sleeps.
package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

var _ sas.Clock = (*Clock)(nil)

// T0 is where tests start their fake clocks: one fixed instant for every
// package, on a whole second (HTTP-dates, of second precision, and stores
// of millisecond precision hold it exactly), in UTC.
var T0 = time.UnixMilli(1_800_000_000_000).UTC()

// Clock is a fake sas.Clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads start until it is moved.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward (backward if d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Sleep is a fake sleep for code that takes one (a Sleep func in its
// config): it advances the clock by d at once, or returns ctx's error if ctx
// is already done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}
