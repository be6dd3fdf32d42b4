package sqsqueue

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/smithy-go"

	"github.com/sas-go/sas/internal/sas"
)

// Error codes as SQS reports them, without the "AWS.SimpleQueueService."
// prefix: over the JSON protocol the SDK reports the query-compatible code
// from the x-amzn-query-error header (AWS.SimpleQueueService.NonExistentQueue)
// when the service sends one, and the modelled name (QueueDoesNotExist)
// otherwise. ElasticMQ puts the body's shape id in that header
// (com.amazonaws.sqs#QueueDoesNotExist), which the SDK passes on as it is.
var (
	notFoundCodes = map[string]bool{
		"QueueDoesNotExist": true,
		"NonExistentQueue":  true,
	}
	// Requests that can never succeed as sent.
	invalidCodes = map[string]bool{
		"InvalidParameterValue":        true,
		"InvalidMessageContents":       true,
		"InvalidAddress":               true,
		"InvalidAttributeName":         true,
		"InvalidAttributeValue":        true,
		"InvalidBatchEntryId":          true,
		"InvalidIdFormat":              true,
		"MissingParameter":             true,
		"ReceiptHandleIsInvalid":       true,
		"UnsupportedOperation":         true,
		"QueueNameExists":              true,
		"QueueAlreadyExists":           true,
		"EmptyBatchRequest":            true,
		"BatchEntryIdsNotDistinct":     true,
		"BatchRequestTooLong":          true,
		"TooManyEntriesInBatchRequest": true,
	}
)

// code returns the service's error code without the query-compatible prefix
// or a shape namespace ("com.amazonaws.sqs#"), or "" for an error that did
// not come from the service (network, context).
func code(err error) string {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return ""
	}
	c := apiErr.ErrorCode()
	if i := strings.LastIndexByte(c, '#'); i >= 0 {
		c = c[i+1:]
	}
	return strings.TrimPrefix(c, "AWS.SimpleQueueService.")
}

// translate maps an SQS error to the domain's sentinels, keeping the SDK error
// in the chain for logs and errors.As.
func translate(err error) error {
	c := code(err)
	switch {
	case notFoundCodes[c]:
		return fmt.Errorf("%w: %w", sas.ErrNotFound, err)
	case invalidCodes[c]:
		return fmt.Errorf("%w: %w", sas.ErrInvalid, err)
	}
	return err
}

// perMessage reports whether a SendMessage or DeleteMessage error concerns the
// one message or receipt rather than the call: such errors are reported in
// the result's Failed, as SendMessageBatch and DeleteMessageBatch report them.
func perMessage(err error) bool {
	switch code(err) {
	case "InvalidParameterValue", "InvalidMessageContents", "ReceiptHandleIsInvalid", "InvalidIdFormat":
		return true
	}
	return false
}

// staleReceipt reports whether a ChangeMessageVisibility error means the
// caller no longer holds the message: another consumer received it since
// (SQS answers InvalidParameterValue "... Message does not exist or is not
// available for visibility timeout change"), it was deleted, or its
// visibility already ran out (MessageNotInflight).
func staleReceipt(err error) bool {
	c := code(err)
	if c == "MessageNotInflight" {
		return true
	}
	var apiErr smithy.APIError
	return c == "InvalidParameterValue" && errors.As(err, &apiErr) &&
		strings.Contains(apiErr.ErrorMessage(), "not available for visibility timeout change")
}

// failure turns an error into the entry Failed reports for a message or
// receipt: a sender fault (retrying will not help) only when SQS called the
// request invalid; throttling, network and server errors are worth a retry.
func failure(id string, err error) sas.SendFailure {
	f := sas.SendFailure{ID: id, Code: code(err), Message: err.Error(), SenderFault: invalidCodes[code(err)]}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		f.Message = apiErr.ErrorMessage()
	}
	if f.Code == "" {
		f.Code = "RequestFailed"
	}
	return f
}
