package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/keytest"
)

// The rotation docs/trust.md gives ("The signing key"), on two warm
// instances whose keys age apart: at no step does either drop a reply to a
// request the other signed, and once the old key's stage is removed, a
// reply under it is refused within the keys' maximum age (issue 29, F-12).
func TestKeyRotationDropsNoReplyAndRevokes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const maxAge = time.Minute
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	secret := keytest.New(k1)
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	clockB := clocktest.New(t0) // B's keys age on a clock of their own
	instance := func(id string, clock sas.Clock) *scheduler.Handler {
		signer, err := sas.NewSourcedSigner(f.ctx, secret.Read, clock, maxAge)
		require.NoError(t, err)
		return scheduler.NewHandler(f.newServiceConfig(id, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) {
			c.Signer, c.RequireSignedReplies = signer, true
		}))
	}
	a, b := instance("s-a", f.clock), instance("s-b", clockB)
	submit := func(h *scheduler.Handler, id string) sas.AgentRequest {
		t.Helper()
		require.Empty(t, f.handleWith(h, f.event(intake(id, "payment", ""))))
		return f.request()
	}
	keyOf := func(req sas.AgentRequest) string { return strings.SplitN(req.Sig, ".", 3)[1] }
	answered := func(h *scheduler.Handler, req sas.AgentRequest) bool {
		t.Helper()
		require.Empty(t, f.handleWith(h, f.event(done(req))))
		return f.step(req.OrderID, req.Step).ProcessState == sas.Processed
	}

	before := submit(a, "o-before") // signed with k1, in flight through the rotation
	require.Equal(t, sas.KeyID(k1), keyOf(before))

	// 1. The new key is put as AWSPENDING: accepted, not yet signing.
	secret.PutPending(k2)
	f.clock.Advance(maxAge)
	pending := submit(a, "o-pending")
	require.Equal(t, sas.KeyID(k1), keyOf(pending), "a pending key does not sign")

	// 2. After the maximum age, AWSCURRENT moves to it; the old key becomes
	// AWSPREVIOUS. A re-reads at once, B not yet: each accepts the other's.
	f.clock.Advance(maxAge)
	secret.Promote()
	clockB.Advance(maxAge) // B read the pending key at step 1
	rotated := submit(a, "o-rotated")
	require.Equal(t, sas.KeyID(k2), keyOf(rotated))
	require.True(t, answered(b, rotated), "B, before its re-read, accepts the new key it read as pending")
	require.True(t, answered(b, before), "B accepts the old key")
	clockB.Advance(maxAge)
	require.True(t, answered(a, pending), "A accepts the previous key")
	later := submit(b, "o-later")
	require.Equal(t, sas.KeyID(k2), keyOf(later), "B signs with the new key after its re-read")

	// 3. Once nothing signed with it is in flight, the old key's stage is
	// removed: within the maximum age neither instance believes it.
	stale := submit(a, "o-stale")
	old, err := sas.NewSigner(k1)
	require.NoError(t, err)
	stale.Sig = old.Sign(stale.Signed()) // a reply under the old key, as a thief of it would sign
	secret.RemovePrevious()
	f.clock.Advance(maxAge)
	clockB.Advance(maxAge)
	require.False(t, answered(a, stale), "A refuses the revoked key")
	require.False(t, answered(b, stale), "B refuses the revoked key")
	require.Equal(t, sas.Processing, f.step("o-stale", 0).ProcessState)
	require.True(t, answered(b, later), "the current key still passes")
}
