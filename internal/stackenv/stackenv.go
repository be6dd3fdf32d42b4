// Package stackenv turns a deployed SAS stack's outputs into the SAS_*
// environment variables that sasctl, the integration suite and other clients
// read (docs/state-store.md), so nobody copies them by hand. The outputs come
// from the file `cdk deploy --outputs-file` writes (`make deploy` writes
// infra/outputs.json) or from CloudFormation's DescribeStacks.
package stackenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
)

// Var maps one stack output to one environment variable.
type Var struct {
	Output string // the output's key under the construct id "Default" (infra/main.go)
	Name   string // the variable
}

// Vars are the outputs of infra/sascdk (SAS.outputs) that name a variable,
// in the order Env returns them. Each output's description starts with the
// variable's name.
var Vars = []Var{
	{"IntakeQueueUrl", "SAS_INTAKE_QUEUE_URL"},
	{"SchedulerQueueUrl", "SAS_SCHEDULER_QUEUE_URL"},
	{"ControlQueueUrl", "SAS_CONTROL_QUEUE_URL"}, // sasctl resubmit and compensate (docs/trust.md)
	{"OrdersTableName", "SAS_ORDERS_TABLE"},
	{"StateTableName", "SAS_STATE_TABLE"},
	{"AlertTopicArn", "SAS_ALERT_TOPIC_ARN"},
	{"AlertBusName", "SAS_EVENT_BUS_NAME"},
	{"AgentQueues", "SAS_AGENT_QUEUES"},
	{"AgentQueueUrl", "SAS_AGENT_QUEUE_URL"},
	// The console's redrive moves a control message back only from the
	// supervisor or an operator (docs/console.md).
	{"SupervisorRoleId", "SAS_SUPERVISOR_SENDER_ID"},
}

// required are the outputs without which these are not a SAS stack's.
var required = []string{"IntakeQueueUrl", "OrdersTableName", "StateTableName"}

// ReadOutputsFile reads the outputs of one stack from a file written by
// `cdk deploy --outputs-file` ({"<stack>": {"<output>": "<value>"}}). With
// stack "" the file must hold exactly one stack.
func ReadOutputsFile(path, stack string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the stack outputs: %w", err)
	}
	out, err := ParseOutputs(b, stack)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseOutputs decodes the contents of a `cdk deploy --outputs-file` file
// and returns the outputs of stack (or of its only stack, for "").
func ParseOutputs(data []byte, stack string) (map[string]string, error) {
	var all map[string]map[string]string
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf(`want cdk's outputs file, {"<stack>": {"<output>": "<value>"}}: %w`, err)
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	if stack == "" {
		if len(all) != 1 {
			return nil, fmt.Errorf("%d stacks (%s): name one", len(all), strings.Join(names, ", "))
		}
		stack = names[0]
	}
	out, ok := all[stack]
	if !ok {
		return nil, fmt.Errorf("no outputs for stack %s (stacks: %s)", stack, strings.Join(names, ", "))
	}
	return out, nil
}

// DescribeStacksAPI is the part of the CloudFormation client StackOutputs
// uses.
type DescribeStacksAPI interface {
	DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// StackOutputs reads a deployed stack's outputs from CloudFormation.
func StackOutputs(ctx context.Context, api DescribeStacksAPI, stack string) (map[string]string, error) {
	res, err := api.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		return nil, fmt.Errorf("describing stack %s: %w", stack, err)
	}
	if len(res.Stacks) != 1 {
		return nil, fmt.Errorf("describing stack %s: %d stacks found", stack, len(res.Stacks))
	}
	out := map[string]string{}
	for _, o := range res.Stacks[0].Outputs {
		out[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return out, nil
}

// hashSuffix is the hash CDK appends to the logical id of an output under a
// construct id other than "Default".
var hashSuffix = regexp.MustCompile(`[0-9A-F]{8}$`)

// find returns the value of the output named key: the key itself (the
// construct under "Default", as in infra/main.go), else the one output whose
// key is CDK's path prefix, key and hash ("SasIntakeQueueUrl1A2B3C4D", the
// construct in an app of your own). Two such outputs are an error: the stack
// holds more than one SAS.
func find(outputs map[string]string, key string) (string, bool, error) {
	if v, ok := outputs[key]; ok {
		return v, true, nil
	}
	var hits []string
	for k := range outputs {
		if hashSuffix.MatchString(k) && strings.HasSuffix(k[:len(k)-8], key) {
			hits = append(hits, k)
		}
	}
	switch len(hits) {
	case 0:
		return "", false, nil
	case 1:
		return outputs[hits[0]], true, nil
	}
	sort.Strings(hits)
	return "", false, fmt.Errorf("outputs %s all look like %s: more than one SAS in the stack", strings.Join(hits, ", "), key)
}

// Env maps the outputs to "NAME=value" variables, in the order of Vars,
// leaving out those the stack does not have (SAS_AGENT_QUEUE_URL with more
// than one agent).
func Env(outputs map[string]string) ([]string, error) {
	var env, missing []string
	var errs []error
	for _, v := range Vars {
		val, ok, err := find(outputs, v.Output)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			if slices.Contains(required, v.Output) {
				missing = append(missing, v.Output)
			}
			continue
		}
		env = append(env, v.Name+"="+val)
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("no %s among the outputs: not a SAS stack's", strings.Join(missing, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return env, nil
}

// Getenv returns a lookup that answers the variables of env and asks
// fallback for the others.
func Getenv(env []string, fallback func(string) string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return fallback(k)
	}
}
