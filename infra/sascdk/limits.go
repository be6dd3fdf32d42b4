package sascdk

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/workflow"
)

// MaxResourcesPerTemplate is CloudFormation's limit on a template's
// resources.
const MaxResourcesPerTemplate = 500

// queueNames names the agents' queues. The deployment file lists every
// agent's queues and is written at synth, when a queue's URL is still a
// token; so the queues get names fixed at synth, and the functions resolve
// a name against the scheduler queue's URL (same account, region and
// endpoint). Names must be unique in the account and region: each starts
// with the stack's name and a hash of the stack's name and the construct's
// path, which is also the prefix the policies name with nested agent
// stacks.
type queueNames struct {
	prefix string // <stack>-<hash>-
}

const maxQueueName = 80

var notQueueNameChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func newQueueNames(s *SAS) queueNames {
	stack := awscdk.Stack_Of(s)
	name := *stack.StackName()
	if *awscdk.Token_IsUnresolved(jsii.String(name)) {
		name = *stack.Node().Path() // a nested stack's name is a token
	}
	h := sha256.Sum256([]byte(name + "\x00" + *s.Node().Path()))
	part := notQueueNameChars.ReplaceAllString(name, "-")
	if len(part) > 24 {
		part = part[:24]
	}
	return queueNames{prefix: part + "-" + hex.EncodeToString(h[:])[:8] + "-"}
}

// Suffixes of an agent's queue names (queueNames.queue): its request
// queue has none.
const (
	laneSuffix    = "-lane"
	repliesSuffix = "-replies"
)

// queue is the name of an agent's queue with suffix: "" its request queue,
// laneSuffix its priority lane, repliesSuffix its reply queue. An agent
// name that does not fit, or has characters SQS does not allow (a dot), is
// cut and given a hash of its own, so names stay unique.
func (n queueNames) queue(agent, suffix string) string {
	part := notQueueNameChars.ReplaceAllString(agent, "_")
	room := maxQueueName - len(n.prefix) - len(suffix)
	if part != agent || len(part) > room {
		h := sha256.Sum256([]byte(agent))
		tag := "-" + hex.EncodeToString(h[:])[:8]
		if len(part) > room-len(tag) {
			part = part[:room-len(tag)]
		}
		part += tag
	}
	return n.prefix + part + suffix
}

// agentRolePath is the IAM path of the agents' roles with nested agent
// stacks (nil otherwise): the scheduler queue's policy names the path, not
// every role.
func (s *SAS) agentRolePath() *string {
	if !s.p.NestedAgentStacks {
		return nil
	}
	return jsii.String("/" + strings.TrimSuffix(s.names.prefix, "-") + "/")
}

// deploymentFile is the workflow file shipped beside every SAS bootstrap:
// the workflows (none for the reference workflows) and the deployment
// section, checked here with the function the bootstraps check it with at
// start-up, so that a problem reads the same at synth.
func (s *SAS) deploymentFile() ([]byte, error) {
	d := &workflow.Deployment{
		Agents: make(map[string]workflow.AgentQueues, len(s.p.Agents)),
		Limits: &workflow.Limits{
			MaxFailures:   s.p.MaxFailures,
			StepTimeout:   workflow.Duration(s.p.StepTimeout),
			PickupTimeout: workflow.Duration(s.p.PickupTimeout),
		},
	}
	for _, a := range s.p.Agents {
		q := workflow.AgentQueues{Queue: s.names.queue(a.Name, ""), Replies: s.names.queue(a.Name, repliesSuffix)}
		if a.PriorityConcurrency > 0 {
			q.PriorityQueue = s.names.queue(a.Name, laneSuffix)
		}
		d.Agents[a.Name] = q
	}
	if err := d.Validate(workflowsFileName); err != nil {
		return nil, err
	}
	b, err := workflowsJSON(s.p.workflows, d)
	if err != nil {
		return nil, err
	}
	if len(b) > workflow.MaxFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the %d the functions read", workflowsFileName, len(b), workflow.MaxFileBytes)
	}
	return b, nil
}

// Synth synthesizes the app and checks every template of its cloud
// assembly against CloudFormation's and Lambda's limits (CheckAssembly).
// Every problem, a synth error included, comes back as an error of one
// line each rather than a panic with a trace. A CDK app ends with it:
//
//	if err := sascdk.Synth(app); err != nil {
//		log.Fatal(err)
//	}
func Synth(app awscdk.App) (err error) {
	var asm cxapi.CloudAssembly
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg := firstLine(fmt.Sprint(r))
				if strings.Contains(msg, "TooManyResourcesInStack") {
					msg += "; set Props.NestedAgentStacks to put each agent in a nested stack of its own"
				}
				err = fmt.Errorf("synth: %s", msg)
			}
		}()
		asm = app.Synth(nil)
	}()
	if err != nil {
		return err
	}
	return CheckAssembly(*asm.Directory())
}

// CheckAssembly checks every template in a cloud assembly directory (cdk.out,
// nested stacks' templates and stages' assemblies included): at most 500
// resources each, and every Lambda function's environment within 4 KB once
// its references resolve (each counted as the longest value it can be). It
// returns one line per problem.
func CheckAssembly(dir string) error {
	var errs []error
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".template.json") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var doc struct {
			Resources map[string]struct {
				Type       string
				Properties map[string]any
			}
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name := filepath.Base(path)
		if n := len(doc.Resources); n > MaxResourcesPerTemplate {
			errs = append(errs, errors.New(overLimit(name, n)))
		}
		ids := make([]string, 0, len(doc.Resources))
		for id := range doc.Resources {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			r := doc.Resources[id]
			if r.Type != "AWS::Lambda::Function" {
				continue
			}
			if size := TemplateEnvSize(r.Properties); size > lambdaEnvLimit {
				errs = append(errs, fmt.Errorf("%s: function %s: its environment may reach %d bytes once deployed, over Lambda's limit of %d", name, id, size, lambdaEnvLimit))
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("checking the cloud assembly: %w", err))
	}
	return errors.Join(errs...)
}

// TemplateEnvSize is the most a function's environment in a template (its
// Properties) can weigh once deployed: every intrinsic counted as the
// longest value one of ours resolves to.
func TemplateEnvSize(properties map[string]any) int {
	env, _ := properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	size := 0
	for k, v := range vars {
		size += len(k)
		if s, ok := v.(string); ok {
			size += len(s)
		} else {
			size += resolvedTokenBytes
		}
	}
	return size
}

func overLimit(where string, n int) string {
	return fmt.Sprintf("%s: %d resources, over CloudFormation's limit of %d per template: set Props.NestedAgentStacks to put each agent in a nested stack of its own", where, n, MaxResourcesPerTemplate)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// CheckLimits is CheckAssembly's resource count before synth, from the
// construct tree: one line per stack at or below scope's stack over
// CloudFormation's limit.
func CheckLimits(scope constructs.Construct) []string {
	counts := ResourceCounts(scope)
	var problems []string
	for _, path := range sortedKeys(counts) {
		// A top-level stack also gets CDK's metadata resource.
		if n := counts[path] + 1; n > MaxResourcesPerTemplate {
			problems = append(problems, "stack "+overLimit(path, n))
		}
	}
	return problems
}

// ResourceCounts is the number of CloudFormation resources of each stack at
// or below scope's stack, by the stack's construct path (a nested stack
// counts once in its parent, and its own resources in its own template).
func ResourceCounts(scope constructs.Construct) map[string]int {
	root := awscdk.Stack_Of(scope)
	counts := map[string]int{*root.Node().Path(): 0}
	for _, c := range *root.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if !*awscdk.CfnResource_IsCfnResource(c) {
			continue
		}
		counts[*awscdk.Stack_Of(c).Node().Path()]++
	}
	return counts
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
