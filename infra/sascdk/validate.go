package sascdk

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/workflow"
)

// Validate reports every configuration error, after defaults are applied:
// the knobs, the agents, and the workflows (read from WorkflowsFile if set),
// each workflow error a *workflow.FieldError naming the file, the field and
// the reason. New panics with the same errors.
func (p Props) Validate() error {
	_, err := p.resolve()
	return err
}

// resolved is Props with defaults applied and the workflows read and
// checked: what New builds from.
type resolved struct {
	Props
	// workflows is nil when the reference workflows apply.
	workflows []workflow.Workflow
}

func (p Props) resolve() (resolved, error) {
	p = p.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if p.Arch != ArchARM64 && p.Arch != ArchX8664 {
		bad("arch %q: want %s or %s", p.Arch, ArchARM64, ArchX8664)
	}
	if p.DistDir == "" {
		bad("dist dir: required, the directory holding <GOARCH>/<name>/bootstrap")
	}
	switch p.RemovalPolicy {
	case awscdk.RemovalPolicy_RETAIN, awscdk.RemovalPolicy_DESTROY:
	default:
		bad("removal policy %q: want RETAIN or DESTROY", p.RemovalPolicy)
	}
	if p.IndexShards < 1 || p.MaxFailures < 1 {
		bad("index shards and max failures must be at least 1")
	}
	// Lambda timeouts are whole seconds, and the reference workflows' agent
	// must leave room after the step deadline; 12 minutes keeps it under 15.
	if p.StepTimeout < time.Second || p.StepTimeout > 12*time.Minute || p.StepTimeout%time.Second != 0 {
		bad("step timeout %s: want whole seconds between 1s and 12m", p.StepTimeout)
	}
	if p.PickupTimeout < time.Second {
		bad("pickup timeout %s: want at least 1s", p.PickupTimeout)
	}
	for _, arn := range p.AllowedReplyQueueARNs {
		if _, err := replyQueueURL(arn); err != nil {
			errs = append(errs, err)
		}
	}
	for _, arn := range p.OperatorRoleARNs {
		if !operatorARN.MatchString(arn) {
			bad("operator %q: want an IAM role or user ARN, arn:<partition>:iam::<account>:role/<name> or :user/<name>", arn)
		}
	}
	for _, arn := range p.CompleterRoleARNs {
		if !operatorARN.MatchString(arn) {
			bad("completer %q: want an IAM role or user ARN, arn:<partition>:iam::<account>:role/<name> or :user/<name>", arn)
		}
	}
	for _, arn := range p.DeployerRoleARNs {
		if !operatorARN.MatchString(arn) {
			bad("deployer %q: want an IAM role or user ARN, arn:<partition>:iam::<account>:role/<name> or :user/<name>", arn)
		}
	}

	errs = append(errs, p.validateTenants()...)

	r := resolved{Props: p}
	wfErr := error(nil)
	r.workflows, wfErr = p.loadWorkflows()
	if wfErr != nil {
		errs = append(errs, wfErr)
	}
	errs = append(errs, p.validateAgents(r.workflows, wfErr == nil)...)
	if wfErr == nil {
		errs = append(errs, p.validateSchedules(r.workflows)...)
	}
	if err := errors.Join(errs...); err != nil {
		return resolved{}, err
	}
	return r, nil
}

// loadWorkflows returns the definitions of Workflows or WorkflowsFile,
// validated as one deployment's set; nil for the reference workflows.
func (p Props) loadWorkflows() ([]workflow.Workflow, error) {
	switch {
	case p.WorkflowsFile != "" && p.Workflows != nil:
		return nil, errors.New("workflows: set Workflows or WorkflowsFile, not both")
	case p.WorkflowsFile != "":
		return workflow.Load(p.WorkflowsFile)
	case p.Workflows != nil:
		if err := workflow.Validate(p.Workflows...); err != nil {
			return nil, err
		}
		return p.Workflows, nil
	}
	return nil, nil
}

// operatorARN is an IAM role or user: a principal the control queue's
// policy can name.
var operatorARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:(role|user)/[A-Za-z0-9+=,.@_/-]+$`)

// referenceAgent is the agent of every step of the reference workflows
// (internal/registry.PaymentsAgent in the main module).
const referenceAgent = "payments"

// agentNamePattern is what package workflow accepts as a step's agent.
var agentNamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// validateAgents checks the agents, and, when the workflows are known to be
// valid, that every step names one of them.
func (p Props) validateAgents(ws []workflow.Workflow, checkSteps bool) []error {
	var errs []error
	if len(p.Agents) == 0 {
		errs = append(errs, errors.New("agents: at least one agent is required"))
	}
	names := map[string]bool{}
	for i, a := range p.Agents {
		where := fmt.Sprintf("agents[%d] %q", i, a.Name)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf(where+": "+format, args...))
		}
		if !agentNamePattern.MatchString(a.Name) {
			bad("name must be 1-64 characters of A-Z a-z 0-9 . _ -")
		} else if names[a.Name] {
			bad("another agent has this name")
		}
		names[a.Name] = true
		switch {
		case a.builtin && (a.Code != nil || a.CodeDir != ""):
			bad("the built-in HTTP agent brings its own code: leave Code and CodeDir unset")
		case a.builtin:
		case (a.Code == nil) == (a.CodeDir == ""):
			bad("set Code or CodeDir (a directory holding a bootstrap), not both")
		case a.CodeDir != "":
			if st, err := os.Stat(filepath.Join(a.CodeDir, "bootstrap")); err != nil || st.IsDir() {
				bad("code dir %s holds no bootstrap file", a.CodeDir)
			}
		}
		if a.Concurrency < minConcurrency || a.Concurrency > maxConcurrency {
			bad("concurrency %d: the event source's maximum concurrency must be %d to %d", a.Concurrency, minConcurrency, maxConcurrency)
		}
		if a.PriorityConcurrency != 0 && (a.PriorityConcurrency < minConcurrency || a.PriorityConcurrency > maxConcurrency) {
			bad("priority concurrency %d: 0 (no priority lane) or %d to %d", a.PriorityConcurrency, minConcurrency, maxConcurrency)
		}
		if a.MemorySize != 0 && (a.MemorySize < 128 || a.MemorySize > 10240) {
			bad("memory size %d MB: want 128 to 10240", a.MemorySize)
		}
		longest := p.longestStep(ws, a.Name)
		if t := a.Timeout; t != 0 {
			switch {
			case t%time.Second != 0 || t < time.Second || t > maxLambdaTimeout:
				bad("timeout %s: want whole seconds between 1s and %s", t, maxLambdaTimeout)
			case t < longest:
				bad("timeout %s is shorter than its longest step timeout %s: the function would be stopped mid-step", t, longest)
			}
		}
		for k := range a.Environment {
			if slices.Contains(reservedAgentEnv, k) {
				bad("environment: %s is set by the construct", k)
			}
		}
		if a.builtin && a.Environment[envAgentBaseURL] != "" {
			u, err := url.Parse(a.Environment[envAgentBaseURL])
			switch {
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
				bad("base URL %q: want an https URL", a.Environment[envAgentBaseURL])
			case u.Scheme == "http" && !a.AllowHTTP:
				bad("base URL %q: the built-in agent calls https:// services only; set AllowHTTP (context allowHttp=true) for an emulator or a local service", a.Environment[envAgentBaseURL])
			}
		}
		for _, st := range a.RejectStatuses {
			if st < 400 || st > 499 {
				bad("RejectStatuses: %d is not a 4xx status (400-499): a business rejection is the service's refusal of the request", st)
			}
		}
		if !a.builtin && len(a.RejectStatuses) > 0 {
			bad("RejectStatuses is the built-in HTTP agent's setting; your own agent returns agent.Reject")
		}
		if !a.builtin && (a.AllowHTTP || a.Auth != nil) {
			bad("AllowHTTP and Auth are the built-in HTTP agent's settings; your own agent's code reads its own (grant its role a secret with SAS.Agent(name).Role)")
		}
		if au := a.Auth; au != nil {
			if !secretsManagerARN.MatchString(au.SecretARN) && !parameterARN.MatchString(au.SecretARN) {
				bad("auth secret %q: want a Secrets Manager secret's full ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>) or an SSM parameter's (arn:aws:ssm:<region>:<account>:parameter/<name>)", au.SecretARN)
			}
			if au.Header != "" && (!headerName.MatchString(au.Header) || slices.Contains(reservedHeaders, strings.ToLower(au.Header))) {
				bad("auth header %q: want a header name the agent does not set itself", au.Header)
			}
			if au.KMSKeyARN != "" && !kmsKeyARN.MatchString(au.KMSKeyARN) {
				bad("auth KMS key %q: want a key ARN, arn:aws:kms:<region>:<account>:key/<id>", au.KMSKeyARN)
			}
		}
	}
	if !checkSteps || len(p.Agents) == 0 {
		return errs
	}
	list := make([]string, 0, len(p.Agents))
	for _, a := range p.Agents {
		list = append(list, a.Name)
	}
	if ws == nil {
		if !names[referenceAgent] {
			errs = append(errs, fmt.Errorf("agents: without workflows the reference workflows run, and their steps go to the agent %q, which is not an agent of this deployment (agents: %s)",
				referenceAgent, strings.Join(list, ", ")))
		}
		return errs
	}
	for i, w := range ws {
		for j, s := range w.Steps {
			if (s.Agent != "" || s.Callback == nil && s.Wait == nil) && !names[s.Agent] { // a callback or wait step may have no agent
				errs = append(errs, &workflow.FieldError{
					File:   p.WorkflowsFile,
					Path:   fmt.Sprintf("workflows[%d].steps[%d].agent", i, j),
					Reason: fmt.Sprintf("%q is not an agent of this deployment (agents: %s)", s.Agent, strings.Join(list, ", ")),
				})
			}
		}
	}
	return errs
}

// longestStep is the longest timeout of the steps agent runs: StepTimeout
// for the reference workflows, 0 for an agent no step names.
func (p Props) longestStep(ws []workflow.Workflow, agent string) time.Duration {
	if ws == nil {
		return p.StepTimeout
	}
	var longest time.Duration
	for _, w := range ws {
		for _, s := range w.Steps {
			if s.Agent == agent && s.Timeout.D() > longest {
				longest = s.Timeout.D()
			}
		}
	}
	return longest
}

// agentTimeout is an agent function's timeout: its own, or its longest step
// plus sizing.AgentMargin, in whole seconds within Lambda's limit
// (sizing.AgentTimeout).
func (r resolved) agentTimeout(a Agent) time.Duration {
	if a.Timeout != 0 {
		return a.Timeout
	}
	return sizing.AgentTimeout(r.longestStep(r.workflows, a.Name))
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
	if parts[5] == "*" {
		// Every queue of the account, the stack's own included: a submitter
		// could aim status messages at any of them (docs/trust.md).
		return "", fmt.Errorf("reply queue %q: an account-wide wildcard; name a queue, or a name prefix before the *", arn)
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
