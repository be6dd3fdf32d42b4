package sascdk

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/sas-go/sas/workflow"
)

// How the workflows reach the functions.
//
// The definitions are known at synth and the same for every function, so
// they travel inside each function's code asset: a staged directory holding
// a copy of the bootstrap and workflows.json, and SAS_WORKFLOWS_FILE names
// that file relative to the working directory. Lambda unpacks the asset in
// /var/task and starts the bootstrap there (the runtime interface emulator
// does the same); MiniStack, which runs bootstraps as host processes,
// starts them in the directory it unpacked the asset to. So the relative
// name works in both, where "/var/task/workflows.json" would not work in
// MiniStack. A changed definition changes the asset's hash, so a deploy
// replaces the code and new instances load the new file; nothing is read
// from S3, SSM or the network at start-up, so there is no extra permission
// and no start-up call that could fail. The cost is one copy of each
// bootstrap per synth.
const (
	workflowsFileName = "workflows.json"
	// workflowsFileEnv is SAS_WORKFLOWS_FILE's value in the functions.
	workflowsFileEnv = workflowsFileName
)

// workflowsJSON is the workflow file the functions load: the definitions
// as package workflow writes them (File), which workflow.ParseFile reads
// back, and the deployment section.
func workflowsJSON(ws []workflow.Workflow, d *workflow.Deployment) ([]byte, error) {
	b, err := json.MarshalIndent(workflow.File{Workflows: ws, Deployment: d}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("writing the workflows: %w", err)
	}
	return append(b, '\n'), nil
}

// stageWithWorkflows returns a directory holding a copy of
// bootstrapDir/bootstrap and workflows.json. It lives under the cloud
// assembly's directory (cdk.out), named by a hash of both files, so that a
// synth reuses what an earlier one staged and `rm -rf cdk.out` removes it.
func stageWithWorkflows(scope constructs.Construct, bootstrapDir string, workflows []byte) (string, error) {
	bootstrap := filepath.Join(bootstrapDir, "bootstrap")
	body, err := os.ReadFile(bootstrap)
	if err != nil {
		return "", fmt.Errorf("staging the workflows with %s: %w", bootstrap, err)
	}
	sum := sha256.New()
	sum.Write(body)
	sum.Write([]byte{0})
	sum.Write(workflows)
	name := hex.EncodeToString(sum.Sum(nil))[:32]

	// Assets need a Stage (an App) anyway: CDK copies them into its directory.
	stage := awscdk.Stage_Of(scope)
	if stage == nil || stage.Outdir() == nil {
		return "", fmt.Errorf("staging the workflows: the construct is not inside a Stage or an App")
	}
	base := filepath.Join(*stage.Outdir(), "sas-staging")
	dir := filepath.Join(base, name)
	if _, err := os.Stat(filepath.Join(dir, workflowsFileName)); err == nil {
		return dir, nil // staged by an earlier synth: same content, same name
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("staging the workflows: %w", err)
	}
	// Written aside and renamed, so a directory with the final name is
	// always complete.
	tmp, err := os.MkdirTemp(base, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("staging the workflows: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := copyFile(bootstrap, filepath.Join(tmp, "bootstrap"), 0o755); err != nil {
		return "", fmt.Errorf("staging the workflows: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, workflowsFileName), workflows, 0o644); err != nil {
		return "", fmt.Errorf("staging the workflows: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, workflowsFileName)); statErr == nil {
			return dir, nil // a concurrent synth staged the same content
		}
		return "", fmt.Errorf("staging the workflows: %w", err)
	}
	return dir, nil
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
