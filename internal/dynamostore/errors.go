package dynamostore

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

func raceOrTranslate(op string, k sas.StepKey, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return raceFromItem(op, k, ccf.Item)
	}
	return translate(err)
}

func raceFromItem(op string, k sas.StepKey, item map[string]av) error {
	if len(item) == 0 {
		// Every condition requires the record to exist in some state: a
		// failure with no old item means there is no such record.
		return fmt.Errorf("no state record: %w", sas.ErrNotFound)
	}
	cur, derr := decodeStep(item)
	if derr != nil {
		return &sas.RaceError{Op: op, Key: k}
	}
	return &sas.RaceError{Op: op, Key: k, Current: &cur}
}

// notMade is a cancelled transaction none of whose conditions failed:
// another transaction on one of its items was in flight
// (TransactionConflict), or DynamoDB throttled it. Nothing was decided, so
// it is never a lost race (sas.ErrLostRace tells the caller to acknowledge
// and move on): a conflict is sas.ErrConflict, anything else a plain
// error, and either way the caller's message is redelivered (issue 29, N3).
func notMade(tce *types.TransactionCanceledException) error {
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "TransactionConflict" {
			return fmt.Errorf("%s: %w", reasons(tce), sas.ErrConflict)
		}
	}
	return errors.New(reasons(tce))
}

// cancelled reads a TransactWriteItems error: for a cancellation with one
// reason per item (items, or any number when items is 0), the index of the
// first item whose condition failed and the item as it was (i -1: none
// failed, and notMade is the error the cancellation stands for). ok is
// false for any other error, which translate maps. Every transaction of the
// store reads its failure here, so a conflict is never a lost race
// (issue 29, N3).
func cancelled(err error, items int) (i int, item map[string]av, notMadeErr error, ok bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 || (items > 0 && len(tce.CancellationReasons) != items) {
		return -1, nil, nil, false
	}
	for i, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return i, r.Item, nil, true
		}
	}
	return -1, nil, notMade(tce), true
}

func reasons(tce *types.TransactionCanceledException) string {
	var out []string
	for _, r := range tce.CancellationReasons {
		out = append(out, aws.ToString(r.Code))
	}
	return fmt.Sprintf("transaction cancelled %v", out)
}

// translate maps vendor errors onto the domain's sentinels.
func translate(err error) error {
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return fmt.Errorf("table or index missing (%s): %w", aws.ToString(rnf.Message), sas.ErrNotFound)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", aws.ToString(ccf.Message), sas.ErrLostRace)
	}
	var tc *types.TransactionConflictException
	if errors.As(err, &tc) {
		// A single write on an item a transaction holds.
		return fmt.Errorf("%s: %w", aws.ToString(tc.Message), sas.ErrConflict)
	}
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" {
		return fmt.Errorf("%v: %w", err, sas.ErrInvalid)
	}
	return err
}
