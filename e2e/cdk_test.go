//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/sas-go/sas/internal/dev/rig"
)

// stackName is the CDK app's stack id (infra/main.go).
const stackName = "SasStack"

// cdk runs the pinned CDK CLI (infra/package.json) for one CDK app and one
// stack against MiniStack. Each command's output goes to its own log in
// workDir, where the cloud assembly and the outputs file go too.
type cdk struct {
	cli     string // infra/node_modules/.bin/cdk
	appDir  string // where the app's cdk.json is; the commands run there
	stack   string
	workDir string
	env     []string
}

func newCDK(cli, appDir, stack, workDir, endpoint string) *cdk {
	env := awsEnv(endpoint)
	// The same quiet switches as the Makefile's CDK_ENV and SYNTH_ENV: no
	// version check or notices (both go to the network), and no built-in
	// template validation (about 30 s of WASM per synth; lint-infra runs
	// cfn-lint on the same template).
	env = append(env, "CDK_DISABLE_VERSION_CHECK=1")
	if os.Getenv("CDK_VALIDATION") == "" {
		env = append(env, "CDK_VALIDATION=false")
	}
	if os.Getenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION") == "" {
		if major := nodeMajor(); major != "" {
			env = append(env, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="+major)
		}
	}
	return &cdk{cli: cli, appDir: appDir, stack: stack, workDir: workDir, env: env}
}

func (c *cdk) run(ctx context.Context, logName string, args ...string) error {
	// The CLI itself, not npx: an example app's directory has no
	// node_modules of its own for npx to find it in.
	argv := append([]string{c.cli}, args...)
	argv = append(argv, "--no-notices")
	return runProc(ctx, rig.ProcessSpec{Name: "cdk " + args[0] + " (" + c.stack + ")", Dir: c.appDir, Env: c.env, LogPath: filepath.Join(c.workDir, logName), Argv: argv})
}

// assembly is where synth writes the cloud assembly; bootstrap and deploy
// read it (--app), so the Go app is synthesized once and the app's own
// cdk.out is left alone.
func (c *cdk) assembly() string { return filepath.Join(c.workDir, "cdk.out") }

// outputsFile is where deploy writes the stack's outputs.
func (c *cdk) outputsFile() string { return filepath.Join(c.workDir, "outputs.json") }

// synth synthesizes the stack with the given context.
func (c *cdk) synth(ctx context.Context, context map[string]string) error {
	args := []string{"synth", "--quiet", "--output", c.assembly()}
	keys := make([]string, 0, len(context))
	for k := range context {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+context[k])
	}
	return c.run(ctx, "cdk-synth.log", args...)
}

// bootstrap creates the CDK toolkit stack (staging bucket, roles, version
// parameter) in MiniStack's account, for the environment of the assembly.
// It is needed once per MiniStack: emulator.bootstrap runs it once.
func (c *cdk) bootstrap(ctx context.Context) error {
	return c.run(ctx, "cdk-bootstrap.log", "bootstrap", "--app", c.assembly(), "aws://"+account+"/"+region)
}

// deploy deploys the synthesized stack and returns its outputs.
func (c *cdk) deploy(ctx context.Context) (map[string]string, error) {
	outFile := c.outputsFile()
	if err := c.run(ctx, "cdk-deploy.log", "deploy", "--app", c.assembly(), "--require-approval", "never",
		"--progress", "events", "--outputs-file", outFile, c.stack); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		return nil, fmt.Errorf("reading the deploy outputs: %w", err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", outFile, err)
	}
	out, ok := all[c.stack]
	if !ok {
		return nil, fmt.Errorf("%s has no outputs for %s", outFile, c.stack)
	}
	return out, nil
}

// constructOutput finds the output the construct sascdk names name under a
// construct id other than "Default": CDK names it <path><name><8 hex
// digits>, such as SasIntakeQueueUrlB1C2D3E4 for the construct "Sas".
func constructOutput(outputs map[string]string, path, name string) (string, error) {
	re := regexp.MustCompile("^" + regexp.QuoteMeta(path+name) + "[0-9A-F]{8}$")
	var found []string
	for k := range outputs {
		if k == path+name || re.MatchString(k) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("the deploy outputs have %d outputs named %s%s…, want 1: %v", len(found), path, name, found)
	}
	return outputs[found[0]], nil
}

// template reads the synthesized template.
func (c *cdk) template() (map[string]any, error) {
	path := filepath.Join(c.assembly(), c.stack+".template.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the synthesized template: %w", err)
	}
	var t map[string]any
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return t, nil
}

// dropResources removes from the synthesized template every resource whose
// logical id starts with one of the prefixes, and, transitively, every
// resource that refers to a removed one (a rule's invoke permission, say).
// It is how the test proves that it fails without a part of the stack
// (SAS_E2E_DROP): the same deploy, minus that part. It returns what it
// removed.
func (c *cdk) dropResources(prefixes []string) ([]string, error) {
	t, err := c.template()
	if err != nil {
		return nil, err
	}
	res, _ := t["Resources"].(map[string]any)
	drop := map[string]bool{}
	for id := range res {
		for _, p := range prefixes {
			if strings.HasPrefix(id, p) {
				drop[id] = true
			}
		}
	}
	for _, p := range prefixes {
		found := false
		for id := range drop {
			found = found || strings.HasPrefix(id, p)
		}
		if !found {
			return nil, fmt.Errorf("SAS_E2E_DROP: no resource in the template starts with %q", p)
		}
	}
	for changed := true; changed; {
		changed = false
		for id, r := range res {
			if drop[id] {
				continue
			}
			b, _ := json.Marshal(r)
			for gone := range drop {
				if strings.Contains(string(b), `"`+gone+`"`) {
					drop[id], changed = true, true
					break
				}
			}
		}
	}
	removed := make([]string, 0, len(drop))
	for id := range drop {
		removed = append(removed, id)
		delete(res, id)
	}
	sort.Strings(removed)
	// An output that names a removed resource would fail the deploy.
	if outs, ok := t["Outputs"].(map[string]any); ok {
		for id, o := range outs {
			b, _ := json.Marshal(o)
			for gone := range drop {
				if strings.Contains(string(b), `"`+gone+`"`) {
					delete(outs, id)
				}
			}
		}
	}
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.assembly(), c.stack+".template.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return removed, nil
}

// nodeMajor is the major version of the node on PATH ("20"), or "".
func nodeMajor() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return ""
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _, _ := strings.Cut(v, ".")
	return major
}
