package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
)

// Architectures the functions can be built for. The names are the Lambda
// ones; the bootstraps live under dist/<GOARCH>/<name>/bootstrap.
const (
	ArchARM64 = "arm64"
	ArchX8664 = "x86_64"
)

// StackProps configures the SAS stack. The zero value of every field means
// "the default", so tests and main only set what they change.
type StackProps struct {
	awscdk.StackProps

	// Arch is the Lambda architecture: "arm64" (default) or "x86_64"
	// ("amd64" is accepted too). Local emulators that run the bootstrap as a
	// host process need the host's architecture.
	Arch string
	// DistDir holds the prebuilt bootstraps as <GOARCH>/<name>/bootstrap.
	// Default "../dist": the CDK app runs from infra/, the build writes to
	// the repository root.
	DistDir string
	// AllowedReplyQueueARNs are the queues a submitter may name as replyTo.
	// They become the scheduler's SendMessage resources and, as queue URLs,
	// SAS_ALLOWED_REPLY_QUEUES. An ARN ending in "*" is a prefix. Empty: the
	// scheduler may post status to no queue.
	AllowedReplyQueueARNs []string
	// RemovalPolicy applies to the tables, queues, topic and log groups.
	// Default RETAIN (with table deletion protection) so that deleting the
	// stack never deletes orders; test stacks set DESTROY.
	RemovalPolicy awscdk.RemovalPolicy
	// PaymentsURL is the agent's remote service (SAS_PAYMENTS_URL); unset if empty.
	PaymentsURL string
	// AlertEmail, if set, subscribes that address to the alert topic.
	AlertEmail string

	IndexShards   int           // SAS_INDEX_SHARDS, default 8
	MaxFailures   int           // SAS_MAX_FAILURES, default 3
	StepTimeout   time.Duration // SAS_STEP_TIMEOUT, default 30s
	PickupTimeout time.Duration // SAS_PICKUP_TIMEOUT, default 60s
	// StuckStepAlarmAge is the age of the oldest stuck step that pages an
	// operator. Default 5 minutes: the supervisor sweeps every minute, so a
	// step that old has survived several rescues.
	StuckStepAlarmAge time.Duration
}

// withDefaults returns a copy with every unset field filled in.
func (p StackProps) withDefaults() StackProps {
	if p.Arch == "" {
		p.Arch = ArchARM64
	}
	if p.Arch == "amd64" {
		p.Arch = ArchX8664
	}
	if p.DistDir == "" {
		p.DistDir = "../dist"
	}
	if p.RemovalPolicy == "" {
		p.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	if p.IndexShards == 0 {
		p.IndexShards = 8
	}
	if p.MaxFailures == 0 {
		p.MaxFailures = 3
	}
	if p.StepTimeout == 0 {
		p.StepTimeout = 30 * time.Second
	}
	if p.PickupTimeout == 0 {
		p.PickupTimeout = 60 * time.Second
	}
	if p.StuckStepAlarmAge == 0 {
		p.StuckStepAlarmAge = 5 * time.Minute
	}
	return p
}

// Validate reports the first configuration error, after defaults are applied.
func (p StackProps) Validate() error {
	p = p.withDefaults()
	if p.Arch != ArchARM64 && p.Arch != ArchX8664 {
		return fmt.Errorf("arch %q: want %s or %s", p.Arch, ArchARM64, ArchX8664)
	}
	switch p.RemovalPolicy {
	case awscdk.RemovalPolicy_RETAIN, awscdk.RemovalPolicy_DESTROY:
	default:
		return fmt.Errorf("removal policy %q: want RETAIN or DESTROY", p.RemovalPolicy)
	}
	if p.IndexShards < 1 || p.MaxFailures < 1 {
		return errors.New("index shards and max failures must be at least 1")
	}
	// Lambda timeouts are whole seconds and the agent's must leave room after
	// the step deadline (see agentTimeout); 12 minutes keeps it under Lambda's 15.
	if p.StepTimeout < time.Second || p.StepTimeout > 12*time.Minute || p.StepTimeout%time.Second != 0 {
		return fmt.Errorf("step timeout %s: want whole seconds between 1s and 12m", p.StepTimeout)
	}
	if p.PickupTimeout < time.Second {
		return fmt.Errorf("pickup timeout %s: want at least 1s", p.PickupTimeout)
	}
	for _, arn := range p.AllowedReplyQueueARNs {
		if _, err := replyQueueURL(arn); err != nil {
			return err
		}
	}
	return nil
}

// goarch maps the Lambda architecture name to Go's.
func (p StackProps) goarch() string {
	if p.Arch == ArchX8664 {
		return "amd64"
	}
	return "arm64"
}

// replyQueueURL turns an SQS queue ARN (arn:<partition>:sqs:<region>:<account>:<name>)
// into the queue URL the SDK uses, keeping a trailing "*" so that a prefix
// ARN becomes a prefix URL, as SAS_ALLOWED_REPLY_QUEUES expects.
func replyQueueURL(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[3] == "" || parts[4] == "" || parts[5] == "" {
		return "", fmt.Errorf("reply queue %q: want an SQS queue ARN arn:<partition>:sqs:<region>:<account>:<name>", arn)
	}
	if strings.Contains(strings.TrimSuffix(parts[5], "*"), "*") || strings.ContainsAny(parts[3]+parts[4], "*?") {
		return "", fmt.Errorf("reply queue %q: only a trailing * (a name prefix) is allowed", arn)
	}
	if _, err := strconv.ParseUint(parts[4], 10, 64); err != nil || len(parts[4]) != 12 {
		return "", fmt.Errorf("reply queue %q: account %q is not a 12-digit account id", arn, parts[4])
	}
	domain := "amazonaws.com"
	if parts[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", parts[3], domain, parts[4], parts[5]), nil
}

// Context keys read by PropsFromContext (`npx cdk synth -c arch=x86_64`).
const (
	ctxArch               = "arch"
	ctxDistDir            = "distDir"
	ctxAllowedReplyQueues = "allowedReplyQueues"
	ctxRemovalPolicy      = "removalPolicy"
	ctxPaymentsURL        = "paymentsUrl"
	ctxAlertEmail         = "alertEmail"
	// ctxStepTimeout is a Go duration ("10s"); short ones are for test stacks.
	ctxStepTimeout = "stepTimeout"
)

// PropsFromContext reads the stack configuration from CDK context, so the
// same knobs work from the command line (-c key=value) and from cdk.json.
func PropsFromContext(node constructs.Node) (StackProps, error) {
	get := func(key string) string {
		v := node.TryGetContext(&key)
		if v == nil {
			return ""
		}
		return strings.TrimSpace(fmt.Sprint(v))
	}
	p := StackProps{
		Arch:        get(ctxArch),
		DistDir:     get(ctxDistDir),
		PaymentsURL: get(ctxPaymentsURL),
		AlertEmail:  get(ctxAlertEmail),
	}
	for _, arn := range strings.Split(get(ctxAllowedReplyQueues), ",") {
		if arn = strings.TrimSpace(arn); arn != "" {
			p.AllowedReplyQueueARNs = append(p.AllowedReplyQueueARNs, arn)
		}
	}
	if v := get(ctxStepTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return StackProps{}, fmt.Errorf("context %s=%q: %w", ctxStepTimeout, v, err)
		}
		p.StepTimeout = d
	}
	switch rp := strings.ToLower(get(ctxRemovalPolicy)); rp {
	case "", "retain":
	case "destroy":
		p.RemovalPolicy = awscdk.RemovalPolicy_DESTROY
	default:
		return StackProps{}, fmt.Errorf("context %s=%q: want retain or destroy", ctxRemovalPolicy, rp)
	}
	if err := p.Validate(); err != nil {
		return StackProps{}, fmt.Errorf("stack configuration: %w", err)
	}
	return p, nil
}
