package alerts

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/sas-go/sas/internal/sas"
)

// EventBridgeAPI is the part of the EventBridge client the adapter uses;
// *eventbridge.Client satisfies it, and tests substitute their own.
type EventBridgeAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var (
	_ EventBridgeAPI = (*eventbridge.Client)(nil)
	_ sas.Alerter    = (*EventBridge)(nil)
)

// EventBridge puts alerts on an event bus as events with source "sas" and
// detail-type "OrderStepNeedsOperator", so rules can route them (ticketing,
// chat, automation) without the system knowing the targets.
type EventBridge struct {
	api EventBridgeAPI
	bus string
}

// NewEventBridge returns an alerter that puts events on bus (a name or an
// ARN; "default" is the account's default bus).
func NewEventBridge(api EventBridgeAPI, bus string) (*EventBridge, error) {
	if api == nil {
		return nil, &sas.ValidationError{Field: "api", Reason: "an EventBridge client is required"}
	}
	if bus == "" {
		return nil, &sas.ValidationError{Field: "bus", Reason: "empty"}
	}
	return &EventBridge{api: api, bus: bus}, nil
}

// Alert puts one event. PutEvents answers 200 even when it refused the
// entry, so the entry's own result is checked.
func (e *EventBridge) Alert(ctx context.Context, a sas.Alert) error {
	out, err := e.api.PutEvents(ctx, e.input(a))
	if err != nil {
		return fmt.Errorf("putting alert event for order %s step %d on bus %s: %w", a.OrderID, a.Step, e.bus, err)
	}
	if out.FailedEntryCount > 0 {
		code, msg := "unknown", ""
		if len(out.Entries) > 0 {
			code, msg = aws.ToString(out.Entries[0].ErrorCode), aws.ToString(out.Entries[0].ErrorMessage)
		}
		return fmt.Errorf("putting alert event for order %s step %d on bus %s: refused: %s: %s", a.OrderID, a.Step, e.bus, code, msg)
	}
	return nil
}

func (e *EventBridge) input(a sas.Alert) *eventbridge.PutEventsInput {
	entry := types.PutEventsRequestEntry{
		EventBusName: aws.String(e.bus),
		Source:       aws.String(Source),
		DetailType:   aws.String(DetailType),
		Detail:       aws.String(NewBody(a).JSON()),
	}
	if !a.At.IsZero() {
		entry.Time = aws.Time(a.At.UTC())
	}
	return &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry}}
}
