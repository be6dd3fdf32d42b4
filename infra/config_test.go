package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

func TestReplyQueueURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arn, url, err string
	}{
		{arn: "arn:aws:sqs:eu-west-1:111122223333:status", url: "https://sqs.eu-west-1.amazonaws.com/111122223333/status"},
		{arn: "arn:aws:sqs:us-east-1:111122223333:tenant-*", url: "https://sqs.us-east-1.amazonaws.com/111122223333/tenant-*"},
		{arn: "arn:aws-cn:sqs:cn-north-1:111122223333:q", url: "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q"},
		{arn: "arn:aws-us-gov:sqs:us-gov-west-1:111122223333:q", url: "https://sqs.us-gov-west-1.amazonaws.com/111122223333/q"},
		{arn: "https://sqs.eu-west-1.amazonaws.com/111122223333/status", err: "want an SQS queue ARN"},
		{arn: "arn:aws:sns:eu-west-1:111122223333:topic", err: "want an SQS queue ARN"},
		{arn: "arn:aws:sqs:eu-west-1:111122223333:", err: "want an SQS queue ARN"},
		{arn: "arn:aws:sqs:eu-west-1:111122223333:*", url: "https://sqs.eu-west-1.amazonaws.com/111122223333/*"},
		{arn: "arn:aws:sqs:eu-west-1:111122223333:a*b", err: "only a trailing *"},
		{arn: "arn:aws:sqs:*:111122223333:q", err: "only a trailing *"},
		{arn: "arn:aws:sqs:eu-west-1:1234:q", err: "12-digit account"},
	} {
		url, err := replyQueueURL(tc.arn)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("replyQueueURL(%q) error %v, want one containing %q", tc.arn, err, tc.err)
		case tc.err == "" && (err != nil || url != tc.url):
			t.Errorf("replyQueueURL(%q) = %q, %v; want %q", tc.arn, url, err, tc.url)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := (StackProps{}).Validate(); err != nil {
		t.Fatalf("zero props: %v", err)
	}
	for name, p := range map[string]StackProps{
		"arch":           {Arch: "riscv64"},
		"removal":        {RemovalPolicy: awscdk.RemovalPolicy_SNAPSHOT},
		"shards":         {IndexShards: -1},
		"step too long":  {StepTimeout: 13 * time.Minute},
		"step fraction":  {StepTimeout: 1500 * time.Millisecond},
		"pickup":         {PickupTimeout: time.Millisecond},
		"reply queue":    {AllowedReplyQueueARNs: []string{"not-an-arn"}},
		"max failures":   {MaxFailures: -2},
		"step too short": {StepTimeout: time.Millisecond},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, p)
		}
	}
	if got := (StackProps{Arch: "amd64"}).withDefaults().Arch; got != ArchX8664 {
		t.Errorf("amd64 normalises to %q, want %q", got, ArchX8664)
	}
}

// TestPropsFromContext reads the knobs the way `cdk -c key=value` passes
// them. It needs the jsii runtime, so it shares the one the stack tests use.
func TestPropsFromContext(t *testing.T) {
	stacks(t) // start the shared runtime the usual way
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"arch":               "x86_64",
		"allowedReplyQueues": " arn:aws:sqs:eu-west-1:111122223333:a , ,arn:aws:sqs:eu-west-1:111122223333:b-*",
		"removalPolicy":      "Destroy",
		"paymentsUrl":        "https://pay.example.test",
	}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	if p.Arch != ArchX8664 || p.RemovalPolicy != awscdk.RemovalPolicy_DESTROY || p.PaymentsURL != "https://pay.example.test" {
		t.Errorf("props %+v", p)
	}
	if want := []string{"arn:aws:sqs:eu-west-1:111122223333:a", "arn:aws:sqs:eu-west-1:111122223333:b-*"}; !reflect.DeepEqual(p.AllowedReplyQueueARNs, want) {
		t.Errorf("reply queues %v, want %v", p.AllowedReplyQueueARNs, want)
	}

	bad := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"removalPolicy": "snapshot"}})
	if _, err := PropsFromContext(bad.Node()); err == nil {
		t.Error("removalPolicy=snapshot accepted")
	}
	empty := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"allowedReplyQueues": ""}})
	if p, err := PropsFromContext(empty.Node()); err != nil || p.AllowedReplyQueueARNs != nil {
		t.Errorf("empty context: %+v, %v", p, err)
	}
}
