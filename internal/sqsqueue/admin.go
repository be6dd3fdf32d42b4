package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/internal/sas"
)

// CreateQueue creates the queue (and its dead-letter queue). Creating a queue
// that exists with the same attributes returns its URL, as SQS does.
func (q *Queue) CreateQueue(ctx context.Context, p sas.CreateQueueParams) (sas.CreatedQueue, error) {
	if p.Name == "" {
		return sas.CreatedQueue{}, fmt.Errorf("creating queue: %w", &sas.ValidationError{Field: "Name", Reason: "empty"})
	}
	if p.MaxReceiveCount < 0 {
		return sas.CreatedQueue{}, fmt.Errorf("creating queue %s: %w", p.Name,
			&sas.ValidationError{Field: "MaxReceiveCount", Reason: "negative"})
	}
	attrs := make(map[string]string, len(p.Attributes)+1)
	for k, v := range p.Attributes {
		attrs[k] = v
	}
	var created sas.CreatedQueue
	if p.MaxReceiveCount > 0 {
		dlqName := DLQName(p.Name)
		dlqAttrs := map[string]string{}
		if strings.HasSuffix(p.Name, ".fifo") {
			dlqAttrs["FifoQueue"] = "true"
		}
		dlqURL, err := q.createOne(ctx, dlqName, dlqAttrs)
		if err != nil {
			return sas.CreatedQueue{}, err
		}
		arn, err := q.QueueARN(ctx, dlqURL)
		if err != nil {
			return sas.CreatedQueue{}, err
		}
		policy, err := json.Marshal(map[string]string{
			"deadLetterTargetArn": arn,
			"maxReceiveCount":     strconv.Itoa(p.MaxReceiveCount),
		})
		if err != nil {
			return sas.CreatedQueue{}, fmt.Errorf("creating queue %s: %w", p.Name, err)
		}
		attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
		created.DLQURL = dlqURL
	}
	url, err := q.createOne(ctx, p.Name, attrs)
	if err != nil {
		return sas.CreatedQueue{}, err
	}
	created.URL = url
	return created, nil
}

// DLQName is the name CreateQueue gives a queue's dead-letter queue.
func DLQName(name string) string {
	if base, ok := strings.CutSuffix(name, ".fifo"); ok {
		return base + "-dlq.fifo"
	}
	return name + "-dlq"
}

func (q *Queue) createOne(ctx context.Context, name string, attrs map[string]string) (string, error) {
	in := &sqs.CreateQueueInput{QueueName: aws.String(name)}
	if len(attrs) > 0 {
		in.Attributes = attrs
	}
	out, err := q.api.CreateQueue(ctx, in)
	if err != nil {
		return "", fmt.Errorf("creating queue %s: %w", name, translate(err))
	}
	if aws.ToString(out.QueueUrl) == "" {
		return "", fmt.Errorf("creating queue %s: the service returned no queue URL", name)
	}
	return aws.ToString(out.QueueUrl), nil
}

// QueueARN returns a queue's ARN, which redrive policies and IAM name it by.
func (q *Queue) QueueARN(ctx context.Context, url string) (string, error) {
	out, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("reading the ARN of %s: %w", url, translate(err))
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("reading the ARN of %s: the service returned none", url)
	}
	return arn, nil
}

// DeleteQueue deletes a queue; one that does not exist is ErrNotFound.
func (q *Queue) DeleteQueue(ctx context.Context, url string) error {
	if _, err := q.api.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		return fmt.Errorf("deleting queue %s: %w", url, translate(err))
	}
	return nil
}

// Depth reads a queue's approximate message counts with one
// GetQueueAttributes request (sas.DepthReader). SQS documents the counts as
// approximate: a message sent or received in the last few seconds may not
// be counted yet.
func (q *Queue) Depth(ctx context.Context, url string) (sas.QueueDepth, error) {
	out, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return sas.QueueDepth{}, fmt.Errorf("reading the depth of %s: %w", url, translate(err))
	}
	count := func(name types.QueueAttributeName) (int, error) {
		v, ok := out.Attributes[string(name)]
		if !ok {
			return 0, nil // an emulator may leave out a zero count
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("reading the depth of %s: %s is %q, not a count", url, name, v)
		}
		return n, nil
	}
	var d sas.QueueDepth
	var errs [3]error
	d.Visible, errs[0] = count(types.QueueAttributeNameApproximateNumberOfMessages)
	d.InFlight, errs[1] = count(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	d.Delayed, errs[2] = count(types.QueueAttributeNameApproximateNumberOfMessagesDelayed)
	return d, errors.Join(errs[:]...)
}

// DeadLetterQueue returns the URL of the queue's dead-letter queue, from
// its redrive policy ("" when it has none). The dead-letter queue is named
// by ARN; its URL is the queue's with the last segment replaced, since a
// redrive target is in the same account and region.
func (q *Queue) DeadLetterQueue(ctx context.Context, url string) (string, error) {
	out, err := q.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", fmt.Errorf("reading the redrive policy of %s: %w", url, translate(err))
	}
	raw := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if raw == "" {
		return "", nil
	}
	var policy struct {
		Target string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(raw), &policy); err != nil || policy.Target == "" {
		return "", fmt.Errorf("reading the redrive policy of %s: %q names no dead-letter queue", url, raw)
	}
	name := sas.QueueName(policy.Target)
	return url[:strings.LastIndex(url, "/")+1] + name, nil
}
