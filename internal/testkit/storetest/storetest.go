// Package storetest is the contract suite every sas.StateStore must pass: the
// in-memory store and the DynamoDB store run the same tests, races included.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// Fixture is one fresh, empty store.
type Fixture struct {
	Store  sas.StateStore
	Shards int
	// Counted returns the requests sent and items read as counted below the
	// store (SDK middleware for DynamoDB), so cost assertions do not trust
	// the store's own bookkeeping. Nil when there is nothing below the store.
	Counted func() sas.ReadStats
	// Load writes records directly (bulk), for tables too large to build
	// through Submit in a test.
	Load func(ctx context.Context, recs []sas.StepRecord) error
	// Conflict makes the store's next transaction on an order meet another
	// transaction in flight on it (DynamoDB's TransactionConflict; see
	// Conflicting). Nil for a store without concurrent transactions.
	Conflict func(orderID string)
}

// Harness makes fixtures.
type Harness struct {
	New func(t *testing.T) Fixture
	// Rounds scales the race tests; defaults to 50.
	Rounds int
	// Large is the big table size of the sweep-cost test; defaults to 100,000.
	Large int
}

// T0 is the tests' epoch: clocktest's, a fixed, millisecond-aligned instant.
var T0 = clocktest.T0

func at(d time.Duration) time.Time { return T0.Add(d) }

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.Rounds == 0 {
		h.Rounds = 50
	}
	if h.Large == 0 {
		h.Large = 100_000
	}
	tests := []struct {
		name string
		f    func(*testing.T, Harness)
	}{
		{"SubmitCreatesPendingRecords", testSubmitCreates},
		{"SubmitDuplicateIsNoop", testSubmitDuplicate},
		{"SubmitConflictingContent", testSubmitConflict},
		{"SubmitConcurrentDuplicates", testSubmitConcurrent},
		{"SubmitWithFirstClaim", testSubmitWithClaim},
		{"ClaimFencing", testClaimFencing},
		{"ClaimRace", testClaimRace},
		{"CompleteFencing", testCompleteFencing},
		{"CompleteWithNextIsAtomic", testCompleteNextAtomic},
		{"FailFencing", testFail},
		{"LateCompletionRacesRescue", testLateCompletionVsRescue},
		{"StaleReplyAfterRescue", testStaleReply},
		{"RescueRequiresExpiry", testRescueRequiresExpiry},
		{"HolderEndsItsAttemptEarly", testHolderEndsItsAttemptEarly},
		{"OutcomesKeepTheRunTiming", testRunTiming},
		{"CompletionRecordsTheResult", testResults},
		{"FailureWithAnEffectIsNoRefusal", testFailedWithEffect},
		{"WaitExtendsWithoutAFailure", testWaitExtendsWithoutAFailure},
		{"StartRecordsThePickUp", testStartRecordsThePickUp},
		{"HeartbeatMovesTheDeadlineOfTheHolder", testHeartbeat},
		{"WaitStepEndsAtItsDueTimeNeverBefore", testCompleteElapsed},
		{"RacingSupervisors", testRacingSupervisors},
		{"StrandedPendingRedriven", testStranded},
		{"UnclaimedRedriveCountsNoFailure", testUnclaimedRedrive},
		{"GiveUpAndResubmit", testGiveUpResubmit},
		{"FindDueExactness", testFindDueExact},
		{"SweepCostIndependentOfTable", testSweepCost},
		{"ListByStatePages", testListByState},
		{"GetOrderNotFound", testNotFound},
		{"Compensation", testCompensation},
		{"CompensationFails", testCompensationFails},

		// a give-up's owed effects (owed.go)
		{"GiveUpOwesItsEffects", testGiveUpOwes},
		{"CompensationClaimSettlesOwed", testCompensationClaimSettlesOwed},
		{"SettleRecheckKeepsItOwed", testSettleRecheck},
		{"UndoGiveUpOwesAlertOnly", testUndoGiveUpOwesAlertOnly},
		{"OwedSweepCost", testOwedSweepCost},

		// resubmission of a compensated order's step (owed.go)
		{"ResubmitRefusedOnceCompensating", testResubmitRefusedOnceCompensating},
		{"CompensationClaimLosesToAResubmit", testCompensationClaimLosesToAResubmit},

		// a transaction cancelled by another is not a lost race (conflict.go)
		{"ConflictIsNotALostRace", testConflictIsNotALostRace},

		// workflow definitions by version (definitions.go)
		{"DefinitionsByVersion", testDefinitions},

		// what a write returns is the whole record (whole.go)
		{"WritesReturnWholeRecords", testWritesReturnWholeRecords},

		// what the console reads and the agents' pauses (console.go)
		{"ListOrdersNewestFirst", testListOrders},
		{"AgentPauses", testAgentPauses},

		// each transition's guard stated once (guards.go)
		{"GuardsMatchTheDomain", testGuardsMatchTheDomain},

		// an order's cancellation (cancel.go)
		{"CancelMarksTheStepInFlight", testCancelMarksTheStepInFlight},
		{"CancelTurnsAwayAReadyStep", testCancelTurnsAwayAReadyStep},
		// branches in parallel (branches.go)
		{"CompleteStartsBranches", testCompleteStartsBranches},
		{"CompleteFencedOnSiblings", testCompleteFencedOnSiblings},
		{"SiblingsFenceSeesACancelsMark", testSiblingsFenceSeesACancelsMark},
		{"CompleteInAGraphSkipsAndClaims", testCompleteInAGraphSkipsAndClaims},

		// fan-out over a list (fanout.go)
		{"FanOutWindow", testFanOutWindow},
		{"FanOutCountsNoMoreThanItsElements", testFanOutCountsNoMoreThanItsElements},
		{"FanOutStopAndUndo", testFanOutStopAndUndo},
		{"ElementClaimFencedOnItsFanOut", testElementClaimFencedOnItsFanOut},
		{"FanOutOfAMarkedStepDoesNotStart", testFanOutOfAMarkedStepDoesNotStart},

		// choices: the steps an order passes over (skip.go)
		{"CompleteSkipsInItsWrite", testCompleteSkips},
		{"SubmitSkipsTheFirstSteps", testSubmitSkips},

		// schedules' runs (schedule.go)
		{"RunsRecordTheirSchedule", testRunsRecordTheirSchedule},
		{"ExclusiveRunIsFenced", testExclusiveRunIsFenced},
		{"SkipRunCountsOnce", testSkipRunCountsOnce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, h)
		})
	}
}

// order builds a test order with the given number of steps.
func order(id string, steps int) sas.Order {
	o := sas.Order{OrderID: id, Workflow: "test", Payload: []byte(`{"amount":42,"currency":"EUR"}`)}
	for i := 0; i < steps; i++ {
		o.Steps = append(o.Steps, fmt.Sprintf("step%d", i))
	}
	return o
}

func submit(t *testing.T, s sas.StateStore, id string, steps int) sas.OrderView {
	t.Helper()
	res, err := s.Submit(context.Background(), sas.SubmitParams{Order: order(id, steps), Now: T0, PickupBy: at(time.Minute)})
	require.NoError(t, err)
	require.True(t, res.Created)
	return res.View
}

func key(id string, step int) sas.StepKey { return sas.StepKey{OrderID: id, Step: step} }

func claim(t *testing.T, s sas.StateStore, k sas.StepKey, attempt int, owner string, now, by time.Time) sas.StepRecord {
	t.Helper()
	r, err := s.Claim(context.Background(), sas.ClaimParams{Key: k, Attempt: attempt, Owner: owner, Now: now, CompleteBy: by})
	require.NoError(t, err)
	return r
}

func get(t *testing.T, s sas.StateStore, id string) sas.OrderView {
	t.Helper()
	v, err := s.GetOrder(context.Background(), id)
	require.NoError(t, err)
	RequireLegalHistory(t, v)
	return v
}

// RequireLegalHistory replays every step's history through sas.Legal and
// checks it ends in the record's state: no illegal transition ever happened.
func RequireLegalHistory(t testing.TB, v sas.OrderView) {
	t.Helper()
	for _, r := range v.Steps {
		require.NotEmpty(t, r.History, "step %s has no history", r.Key())
		prev := sas.ProcessState("")
		for i, h := range r.History {
			require.Equal(t, prev, h.From, "step %s history[%d] starts from %s, record was %s", r.Key(), i, h.From, prev)
			require.True(t, sas.Legal(h.From, h.To), "step %s history[%d]: illegal %s -> %s", r.Key(), i, h.From, h.To)
			prev = h.To
		}
		require.Equal(t, r.ProcessState, prev, "step %s history ends in %s but the record is %s", r.Key(), prev, r.ProcessState)
	}
}

func requireRace(t *testing.T, err error) *sas.RaceError {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, sas.ErrLostRace), "want ErrLostRace, got %v", err)
	var re *sas.RaceError
	require.True(t, errors.As(err, &re), "want a *sas.RaceError, got %T: %v", err, err)
	return re
}
