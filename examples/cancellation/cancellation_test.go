package cancellation_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/cancellation"
	"github.com/sas-go/sas/sastest"
)

// cluster is an in-memory service: what stands (provisioned, processed,
// published), by the forward step's key.
type cluster struct {
	mu       sync.Mutex
	standing map[string]string // key -> what took effect
}

func newCluster() *cluster { return &cluster{standing: map[string]string{}} }

func (c *cluster) do(key, what string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.standing[key] = what
	return nil
}

func (c *cluster) undo(key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.standing, strings.TrimSuffix(key, ":undo")) // a no-op for a key never done
	return nil
}

func (c *cluster) Provision(_ context.Context, key, dataset string) error {
	return c.do(key, "provisioned "+dataset)
}
func (c *cluster) Release(_ context.Context, key string) error { return c.undo(key) }
func (c *cluster) Process(_ context.Context, key, dataset string) error {
	return c.do(key, "processed "+dataset)
}
func (c *cluster) CleanUp(_ context.Context, key string) error { return c.undo(key) }
func (c *cluster) Publish(_ context.Context, key, by string) error {
	return c.do(key, "published, reviewed by "+by)
}

func (c *cluster) left() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.standing {
		out[k] = v
	}
	return out
}

func env(t *testing.T) (*sastest.Env, *cluster) {
	c := newCluster()
	return sastest.New(t, cancellation.Workflows(), cancellation.Jobs(c)), c
}

var job = cancellation.Job{Dataset: "sales-2026"}

// Not cancelled: reviewed a day later and published.
func TestReviewedIsPublished(t *testing.T) {
	t.Parallel()
	e, c := env(t)
	e.Answer("review", sastest.Answer{After: 24 * time.Hour, Result: cancellation.Review{By: "alice"}})
	res := e.Run("job", "j-1", job)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, map[string]string{
		"j-1:0": "provisioned sales-2026", "j-1:1": "processed sales-2026", "j-1:3": "published, reviewed by alice",
	}, c.left())
}

// Cancelled while the work runs: the work settles (it is not cut off), the
// review and the publication never start, the work is cleaned up and the
// resources released, newest first; the order ends cancelled and nobody is
// paged.
func TestCancelledWhileProcessing(t *testing.T) {
	t.Parallel()
	e, c := env(t)
	e.CancelWhen("j-2", "process")
	res := e.Run("job", "j-2", job)
	require.Equal(t, sastest.StatusCancelled, res.Status)
	require.Equal(t, []string{"process", "provision"}, res.Undone, "the cleanup, then the release")
	require.Empty(t, c.left(), "nothing stands")
	require.Equal(t, sastest.StatePending, res.Steps[2].State, "the review never started")
	require.Equal(t, sastest.StatePending, res.Steps[3].State, "the publication never started")
	require.Empty(t, res.Alerts, "a cancel pages nobody")
	require.Equal(t, "cancelled/process", res.Statuses[len(res.Statuses)-1])
}

// Cancelled five hours into the review's three-day wait: the wait ends
// then, the token completes nothing after, and the work is undone.
func TestCancelledDuringTheReview(t *testing.T) {
	t.Parallel()
	e, c := env(t)
	e.Answer("review", sastest.Answer{After: 5 * time.Hour, Cancel: true})
	res := e.Run("job", "j-3", job)
	require.Equal(t, sastest.StatusCancelled, res.Status)
	require.Less(t, res.Took, 6*time.Hour, "the wait ended at the cancel, not at its 72-hour timeout")
	require.Equal(t, []string{"process", "provision"}, res.Undone)
	require.Empty(t, c.left())
	require.Equal(t, sastest.StatePending, res.Steps[3].State, "never published")
	require.Len(t, res.Alerts, 1, "only the review's waiting notification: no page")
	require.Equal(t, "cancelled/review", res.Statuses[len(res.Statuses)-1])
}

// A cancel is aimed at its order: another job runs to the end.
func TestACancelIsAimedAtItsOrder(t *testing.T) {
	t.Parallel()
	e, c := env(t)
	e.Answer("review", sastest.Answer{After: time.Hour, Result: cancellation.Review{By: "bob"}})
	e.CancelWhen("j-4", "provision")
	require.Equal(t, sastest.StatusCancelled, e.Run("job", "j-4", job).Status)
	require.Equal(t, sastest.StatusProcessed, e.Run("job", "j-5", job).Status)
	require.Equal(t, map[string]string{
		"j-5:0": "provisioned sales-2026", "j-5:1": "processed sales-2026", "j-5:3": "published, reviewed by bob",
	}, c.left(), "j-4's provisioning undone, j-5 untouched")
}
