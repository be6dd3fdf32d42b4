package clocktest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sas-go/sas/internal/testkit/clocktest"
)

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := clocktest.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	c.Advance(time.Minute)
	if got := c.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Fatalf("after Advance, Now = %v", got)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set, Now = %v", got)
	}
	if err := c.Sleep(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("after Sleep, Now = %v", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep(cancelled) = %v, want context.Canceled", err)
	}
	if got := c.Now(); !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("a cancelled Sleep moved the clock to %v", got)
	}
}

// Run with -race: the clock is moved and read from many goroutines.
func TestClockIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := clocktest.New(time.Time{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Second)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(time.Time{}.Add(800 * time.Second)) {
		t.Fatalf("Now = %v, want 800 s past the start", got)
	}
}
