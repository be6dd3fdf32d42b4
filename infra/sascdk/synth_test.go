package sascdk

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// Every test shares one jsii runtime (one Node process per test binary) and
// one synthesized app: starting Node and synthesizing cost seconds, the
// assertions themselves milliseconds. The app holds four stacks, each with
// the construct under the id "Default" (as infra/main.go has it, so logical
// ids read like construct ids), synthesized together in one pass:
//
//   - def: what `make deploy` ships without context, the built-in agent
//     "payments" and the reference workflows;
//   - variant: every knob turned;
//   - two: two agents, one built-in with a priority lane and one of the
//     user's own (CodeDir), with workflows given in Go;
//   - five: five agents from a workflow file, code given every way.

// replyQueueARNs configure the variant stack: one exact queue, one prefix.
// operatorRoleARN is the variant's operator: it may send to the control
// queue.
const operatorRoleARN = "arn:aws:iam::111122223333:role/sas-operators"

// completerRoleARN may complete callback steps in the variant.
const completerRoleARN = "arn:aws:iam::111122223333:role/expense-approvals"

// deployerRoleARN is the variant's deployer: it alone (with the account's
// root user) may administer the queues.
const deployerRoleARN = "arn:aws:iam::111122223333:role/sas-deployer"

// The auth secrets of the variant's agent (Secrets Manager, under a
// customer-managed key) and of the two-agent stack's built-in agent (an
// SSM SecureString parameter).
const (
	authSecretARN    = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:payments-token-AbCdEf"
	authKeyARN       = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	authParameterARN = "arn:aws:ssm:eu-west-1:111122223333:parameter/sas/flights-token"
)

var replyQueueARNs = []string{
	"arn:aws:sqs:eu-west-1:111122223333:caller-status",
	"arn:aws:sqs:eu-west-1:111122223333:tenant-*",
}

// synthesized is one stack's template, both as the assertions API sees it
// and as plain JSON for the walks the API has no matcher for.
type synthesized struct {
	stack  awscdk.Stack
	sas    *SAS
	props  Props
	tmpl   assertions.Template
	doc    map[string]any
	outdir string
}

// fixtures are the stacks of the shared app.
type fixtures struct {
	def, variant, two, five *synthesized
}

var (
	synthOnce      sync.Once
	shared         fixtures
	synthFailure   string
	scratchDirs    []string
	distFakeMarker = "fake bootstrap for "
)

func TestMain(m *testing.M) {
	// Node inherits the environment when jsii-runtime-go starts it, during
	// package initialisation, so settings such as CDK_VALIDATION=false (skip
	// aws-cdk-lib's own template validation, ~15 s here; cfn-lint runs in
	// make lint-infra) must come from outside: make test-infra sets them.
	code := m.Run()
	jsii.Close()
	for _, d := range scratchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// stacks synthesizes the shared app on first use and returns the default
// and variant stacks. Tests that need no template never start Node.
func stacks(t *testing.T) (def, variant *synthesized) {
	f := all(t)
	return f.def, f.variant
}

// all synthesizes the shared app on first use.
func all(t *testing.T) fixtures {
	t.Helper()
	synthOnce.Do(func() {
		defer func() {
			// jsii reports construct errors as panics; turn them into a
			// failure every test that asked for the template will see.
			if r := recover(); r != nil {
				synthFailure = fmt.Sprint(r)
			}
		}()
		shared = synthesizeApp()
	})
	if synthFailure != "" {
		t.Fatalf("synthesizing the app: %s", synthFailure)
	}
	return shared
}

// fixtureDist is the fake dist directory of the shared app.
var fixtureDist string

func synthesizeApp() fixtures {
	fixtureDist = fakeDist()
	outdir := scratch("sas-cdk-out-")
	app := awscdk.NewApp(&awscdk.AppProps{
		Outdir: jsii.String(outdir),
		// The feature flags in cdk.json change what is synthesized; tests
		// must see the same ones as `cdk synth`.
		Context: cdkJSONContext(),
	})
	build := func(name string, p Props, more ...func(awscdk.Stack, *Props)) *synthesized {
		stack := awscdk.NewStack(app, jsii.String(name), nil)
		for _, m := range more {
			m(stack, &p)
		}
		sas, err := New(stack, "Default", &p)
		if err != nil {
			panic(err)
		}
		return &synthesized{stack: stack, sas: sas, props: p, outdir: outdir}
	}
	var f fixtures
	f.def = build("SasStack", Props{DistDir: fixtureDist, Agents: []Agent{HTTPAgent("payments", "")}})
	f.variant = build("SasStackVariant", Props{
		DistDir:               fixtureDist,
		Arch:                  ArchX8664,
		AllowedReplyQueueARNs: replyQueueARNs,
		OperatorRoleARNs:      []string{operatorRoleARN},
		DeployerRoleARNs:      []string{deployerRoleARN},
		CompleterRoleARNs:     []string{completerRoleARN},
		RemovalPolicy:         awscdk.RemovalPolicy_DESTROY,
		Agents: []Agent{func() Agent {
			a := HTTPAgent("payments", "https://payments.example.test")
			a.Auth = &AgentAuth{SecretARN: authSecretARN, Header: "X-Api-Key", KMSKeyARN: authKeyARN}
			return a
		}()},
		AlertEmail:           "ops@example.test",
		AllowUnsignedReplies: true,
		XRayTracing:          true,
		Schedules:            variantSchedules,
	}, variantTenants)
	f.two = build("SasStackTwo", twoAgentProps(fixtureDist))
	f.five = build("SasStackFive", fiveAgentProps(fixtureDist))
	for _, s := range []*synthesized{f.def, f.variant, f.two, f.five} {
		s.tmpl = assertions.Template_FromStack(s.stack, nil) // the first call synthesizes the app
		raw, err := json.Marshal(s.tmpl.ToJSON())
		if err != nil {
			panic(err)
		}
		if err := json.Unmarshal(raw, &s.doc); err != nil {
			panic(err)
		}
	}
	return f
}

// fakeDist lays out dist/<goarch>/<name>/bootstrap with recognisable
// contents, so tests need no cross-compile and can check that each function
// ships its own binary.
func fakeDist() string {
	dist := scratch("sas-dist-")
	for _, goarch := range []string{"arm64", "amd64"} {
		for _, name := range []string{"scheduler", "agent", "supervisor", "cars", "trains"} {
			dir := filepath.Join(dist, goarch, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				panic(err)
			}
			body := distFakeMarker + goarch + "/" + name + "\n"
			if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(body), 0o755); err != nil {
				panic(err)
			}
		}
	}
	return dist
}

func scratch(prefix string) string {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		panic(err)
	}
	scratchDirs = append(scratchDirs, d)
	return d
}

func cdkJSONContext() *map[string]any {
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		panic(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		panic(fmt.Errorf("cdk.json: %w", err))
	}
	return &cfg.Context
}

// check runs an assertions call, which panics on mismatch, as a test error.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// --- plain-JSON helpers -----------------------------------------------------

// hashSuffix is the 8-hex-digit hash CDK appends to logical ids.
var hashSuffix = regexp.MustCompile(`[0-9A-F]{8}$`)

// construct turns a logical id back into the construct id it came from
// ("SchedulerQueue12326841" → "SchedulerQueue").
func construct(logicalID string) string { return hashSuffix.ReplaceAllString(logicalID, "") }

// resources returns the resources of one type, keyed by construct id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.doc["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[construct(id)] = res
		}
	}
	return out
}

func (s *synthesized) resource(t *testing.T, typ, constructID string) map[string]any {
	t.Helper()
	r, ok := s.resources(typ)[constructID]
	if !ok {
		t.Fatalf("no %s %q in the template", typ, constructID)
	}
	return r
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// ref names what a CloudFormation value points at, by construct id:
// {"Ref": X} and {"Fn::GetAtt": [X, "Arn"]} → "X"; a Join of a reference and
// a literal suffix → "X/suffix"; the default event bus → "event-bus/default";
// literals stay as they are.
func ref(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			return construct(r)
		}
		if ga, ok := v["Fn::GetAtt"].([]any); ok {
			return construct(ga[0].(string))
		}
		if j, ok := v["Fn::Join"].([]any); ok {
			var b strings.Builder
			for _, part := range j[1].([]any) {
				switch p := part.(type) {
				case string:
					b.WriteString(p)
				case map[string]any:
					if r, ok := p["Ref"].(string); ok && strings.HasPrefix(r, "AWS::") {
						b.WriteString("${" + r + "}")
					} else {
						b.WriteString(ref(p))
					}
				}
			}
			s := b.String()
			if strings.HasSuffix(s, ":event-bus/default") {
				return "event-bus/default"
			}
			return s
		}
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

// list normalises CloudFormation's "one value or a list of values".
func list(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		return []any{v}
	}
}

func strs(v any) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, ref(x))
	}
	sort.Strings(out)
	return out
}

// warnings lists the stack's warning annotations from the cloud assembly,
// which keeps them in <artifact>.metadata.json beside the template.
func (s *synthesized) warnings(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.outdir, *s.stack.ArtifactId()+".metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var metadata map[string][]struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	if err := json.Unmarshal(raw, &metadata); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, entries := range metadata {
		for _, e := range entries {
			if e.Type == "aws:cdk:warning" {
				out = append(out, fmt.Sprint(e.Data))
			}
		}
	}
	return out
}
