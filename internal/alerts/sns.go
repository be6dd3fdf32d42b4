package alerts

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sas-go/sas/internal/sas"
)

// SNSAPI is the part of the SNS client the adapter uses; *sns.Client
// satisfies it, and tests substitute their own.
type SNSAPI interface {
	Publish(ctx context.Context, in *sns.PublishInput, opts ...func(*sns.Options)) (*sns.PublishOutput, error)
}

var (
	_ SNSAPI      = (*sns.Client)(nil)
	_ sas.Alerter = (*SNS)(nil)
)

// SNS publishes alerts to a topic: e-mail, chat and pager subscriptions get
// the subject and the JSON body.
type SNS struct {
	api      SNSAPI
	topicARN string
}

// NewSNS returns an alerter that publishes to topicARN.
func NewSNS(api SNSAPI, topicARN string) (*SNS, error) {
	if api == nil {
		return nil, &sas.ValidationError{Field: "api", Reason: "an SNS client is required"}
	}
	if topicARN == "" {
		return nil, &sas.ValidationError{Field: "topicARN", Reason: "empty"}
	}
	return &SNS{api: api, topicARN: topicARN}, nil
}

// Alert publishes one alert.
func (s *SNS) Alert(ctx context.Context, a sas.Alert) error {
	if _, err := s.api.Publish(ctx, s.input(a)); err != nil {
		return fmt.Errorf("publishing alert for order %s step %d to %s: %w", a.OrderID, a.Step, s.topicARN, err)
	}
	return nil
}

func (s *SNS) input(a sas.Alert) *sns.PublishInput {
	// Message attributes let a subscription filter (say, page only on
	// CompensationFailed) without parsing the body.
	attrs := map[string]types.MessageAttributeValue{}
	str := func(name, v string) {
		if v != "" { // SNS refuses empty attribute values
			attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	str("orderId", a.OrderID)
	str("state", string(a.State))
	str("source", a.Source)
	str("alertId", a.ID)
	attrs["step"] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(a.Step))}
	return &sns.PublishInput{
		TopicArn:          aws.String(s.topicARN),
		Subject:           aws.String(Subject(a)),
		Message:           aws.String(NewBody(a).JSON()),
		MessageAttributes: attrs,
	}
}
