package localstack

import (
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEmbedded checks that the executor the rig installs is whole: go:embed
// skips files starting with _ unless told ("all:").
func TestEmbedded(t *testing.T) {
	for _, f := range []string{
		"process-executor/pyproject.toml",
		"process-executor/sas_localstack_lambda/__init__.py",
		"process-executor/sas_localstack_lambda/plugin.py",
		"process-executor/sas_localstack_lambda/executor.py",
		"process-executor/sas_localstack_lambda/runtime_api.py",
	} {
		if _, err := fs.Stat(Executor, f); err != nil {
			t.Errorf("%s not embedded: %v", f, err)
		}
	}
	pyproject, err := Executor.ReadFile("process-executor/pyproject.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pyproject), `[project.entry-points."localstack.lambda.runtime_executor"]`) {
		t.Error("pyproject.toml does not register the executor under localstack.lambda.runtime_executor")
	}
}

// TestRuntimeAPI runs the Runtime API's own tests (Python, stdlib only: no
// LocalStack needed), which serve it and talk to it as a bootstrap does.
func TestRuntimeAPI(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 not on PATH: %v", err)
	}
	cmd := exec.Command(python, "tests/test_runtime_api.py", "-v")
	cmd.Dir = "process-executor"
	cmd.Env = append(os.Environ(), "PYTHONPATH=.", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s tests/test_runtime_api.py: %v\n%s", python, err, out)
	}
	t.Logf("%s", out)
}
