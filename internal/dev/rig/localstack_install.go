package rig

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/localstack"
)

// LocalStackInstall locates an installed LocalStack.
type LocalStackInstall struct {
	// Python is the venv's interpreter.
	Python string
	// Executor is the directory holding the installed process executor
	// (put on PYTHONPATH: its dist-info names the entry point).
	Executor string
	// Lib holds what LocalStack looks for under
	// $FILESYSTEM_ROOT/var/lib/localstack/lib: java/21 and dynamodb-local/2.
	Lib string
}

// InstallLocalStack makes sure the pinned LocalStack, the executor of this
// checkout and the DynamoDB Local layout are installed under opts.Home, each
// once (a marker written last, under a lock).
func InstallLocalStack(ctx context.Context, opts LocalStackOptions) (*LocalStackInstall, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(opts.Home, "localstack-"+LocalStackVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// DynamoDB Local (and its launcher) first: it has its own lock.
	ddb, err := Install(ctx, Options{Home: opts.Home, SQS: []string{SQSElasticMQ}, Log: logfWriter(opts.Logf)})
	if err != nil {
		return nil, err
	}
	unlock, err := LockFile(ctx, dir+".lock", nil)
	if err != nil {
		return nil, err
	}
	defer unlock()

	inst := &LocalStackInstall{Python: filepath.Join(dir, "venv", "bin", "python")}
	if err := installLocalStackVenv(ctx, opts, dir, inst.Python); err != nil {
		return nil, err
	}
	if inst.Executor, err = installExecutor(ctx, opts, dir, inst.Python); err != nil {
		return nil, err
	}
	if inst.Lib, err = installLocalStackLib(ctx, dir, ddb); err != nil {
		return nil, err
	}
	return inst, nil
}

func installLocalStackVenv(ctx context.Context, opts LocalStackOptions, dir, vpython string) error {
	venv := filepath.Dir(filepath.Dir(vpython))
	if isComplete(venv, LocalStackVersion, vpython) {
		return nil
	}
	python, err := localStackPython(ctx)
	if err != nil {
		return err
	}
	opts.Logf("installing localstack-core %s from PyPI into %s with %s (once per version; about 500 MB)", LocalStackVersion, venv, python)
	begin := time.Now()
	if err := os.RemoveAll(venv); err != nil {
		return fmt.Errorf("clearing a half-finished install: %w", err)
	}
	logPath := filepath.Join(dir, "install.log")
	_ = os.Remove(logPath)
	env := append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	if err := opts.run(ctx, ProcessSpec{Name: "python -m venv", Dir: dir, Env: env, LogPath: logPath, Argv: []string{python, "-m", "venv", venv}}); err != nil {
		return fmt.Errorf("creating the LocalStack venv: %w", err)
	}
	if err := opts.run(ctx, ProcessSpec{Name: "pip install", Dir: dir, Env: env, LogPath: logPath,
		Argv: append([]string{vpython, "-m", "pip", "install"}, localStackPins...)}); err != nil {
		return fmt.Errorf("installing LocalStack from PyPI: %w", err)
	}
	freeze, err := exec.CommandContext(ctx, vpython, "-m", "pip", "freeze").Output()
	if err != nil {
		return fmt.Errorf("pip freeze: %w", err)
	}
	if err := os.WriteFile(filepath.Join(venv, "pip-freeze.txt"), freeze, 0o644); err != nil {
		return err
	}
	opts.Logf("installed localstack-core %s in %s", LocalStackVersion, time.Since(begin).Round(100*time.Millisecond))
	return markComplete(venv, LocalStackVersion)
}

// localStackPython finds a Python new enough for LocalStack:
// $SAS_RIG_LOCALSTACK_PYTHON, else python3.13 (or newer) on PATH, else the
// newest pyenv interpreter ($PYENV_ROOT or ~/.pyenv) that is.
func localStackPython(ctx context.Context) (string, error) {
	if p := os.Getenv(EnvLocalStackPython); p != "" {
		if ok, v := pythonAtLeast(ctx, p, MinLocalStackPython); !ok {
			return "", fmt.Errorf("%s=%s is Python %s; LocalStack %s needs %s or newer", EnvLocalStackPython, p, v, LocalStackVersion, MinLocalStackPython)
		}
		return p, nil
	}
	var candidates []string
	for _, name := range []string{"python3.15", "python3.14", "python3.13", "python3"} {
		if p, err := exec.LookPath(name); err == nil {
			candidates = append(candidates, p)
		}
	}
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		if h, err := os.UserHomeDir(); err == nil {
			root = filepath.Join(h, ".pyenv")
		}
	}
	pyenv, _ := filepath.Glob(filepath.Join(root, "versions", "3.*", "bin", "python3"))
	sort.Slice(pyenv, func(i, j int) bool { return versionLess(pyenvVersion(pyenv[j]), pyenvVersion(pyenv[i])) })
	candidates = append(candidates, pyenv...)
	for _, p := range candidates {
		if ok, _ := pythonAtLeast(ctx, p, MinLocalStackPython); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("LocalStack %s needs Python %s or newer, and none was found (looked for python3.13+ on PATH and in %s/versions): "+
		"install one (pyenv install 3.13, or your distribution's python3.13 with its venv module) or set %s to its path",
		LocalStackVersion, MinLocalStackPython, root, EnvLocalStackPython)
}

func pyenvVersion(python string) string { return filepath.Base(filepath.Dir(filepath.Dir(python))) }

// versionLess compares dotted versions numerically ("3.9.18" < "3.13.0").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// pythonAtLeast runs python and reports whether it is at least min, with
// the version it found.
func pythonAtLeast(ctx context.Context, python, min string) (bool, string) {
	out, err := exec.CommandContext(ctx, python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		return false, "unknown (" + err.Error() + ")"
	}
	v := strings.TrimSpace(string(out))
	return !versionLess(v, min), v
}

// installExecutor installs this checkout's process executor (embedded in
// the binary, package localstack) with pip into a directory named after its
// source, so that a changed executor is installed beside the old one and
// two checkouts do not overwrite each other's.
func installExecutor(ctx context.Context, opts LocalStackOptions, dir, vpython string) (string, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(localstack.Executor, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "__pycache__") {
			return err
		}
		b, err := localstack.Executor.ReadFile(path)
		files[path] = b
		return err
	})
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(files[n]))
		h.Write(files[n])
	}
	target := filepath.Join(dir, "executor-"+hex.EncodeToString(h.Sum(nil))[:12])
	if isComplete(target, "1") {
		return target, nil
	}
	src, err := os.MkdirTemp(dir, "executor-src-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	for _, n := range names {
		p := filepath.Join(src, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(target); err != nil {
		return "", err
	}
	opts.Logf("installing the Lambda process executor into %s", target)
	env := append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
	if err := opts.run(ctx, ProcessSpec{Name: "pip install (executor)", Dir: dir, Env: env, LogPath: filepath.Join(dir, "executor-install.log"),
		Argv: []string{vpython, "-m", "pip", "install", "--no-deps", "--target", target, filepath.Join(src, "process-executor")}}); err != nil {
		return "", fmt.Errorf("installing the Lambda process executor: %w", err)
	}
	return target, markComplete(target, "1")
}

// LocalStack's DynamoDB provider runs `java -javaagent:<lib>/dynamodb-local/2/
// ddb-local-loader-0.1.jar -Djava.library.path=<...>/DynamoDBLocal_lib -jar
// <...>/DynamoDBLocal.jar -port N ...` with JAVA_HOME=<lib>/java/21, after
// downloading both (from hosts these machines cannot reach) unless their
// marker files exist. The rig lays out its own instead:
//
//   - java/21: a link to the host's Java home (17 runs DynamoDB Local 2.x);
//   - dynamodb-local/2/DynamoDBLocal_lib: a link to the rig's DynamoDB
//     Local jars and sqlite4java native libraries (Maven's layout);
//   - dynamodb-local/2/launcher: a link to the rig's launcher, which binds
//     DynamoDB Local to 127.0.0.1 (launcher.go);
//   - dynamodb-local/2/DynamoDBLocal.jar: a jar of only a manifest, naming
//     the launcher as its main class and the jars as its class path;
//   - dynamodb-local/2/ddb-local-loader-0.1.jar: an agent that does nothing.
//     LocalStack's own patches DynamoDB Local for more than 20 GSIs, which
//     the SAS tables do not need.
const noAgentClass = "SasRigNoAgent"

const noAgentSource = `// Generated by the sas rig (internal/dev/rig/localstack_install.go); do not edit.
public final class SasRigNoAgent {
  public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
`

func installLocalStackLib(ctx context.Context, dir string, ddb *Installation) (string, error) {
	if ddb.DynamoDBLocalLauncher == "" {
		return "", errors.New("LocalStack's DynamoDB needs the rig's DynamoDB Local launcher, which needs javac (a JDK)")
	}
	sum := sha256.Sum256([]byte(DynamoDBLocalVersion + "\x00" + ddb.DynamoDBLocalLauncher + "\x00" + noAgentSource + "\x00pdeathsig"))
	lib := filepath.Join(dir, "lib-"+hex.EncodeToString(sum[:6]))
	ddbDir := filepath.Join(lib, "dynamodb-local", "2")
	if isComplete(lib, "1", filepath.Join(ddbDir, "DynamoDBLocal.jar")) {
		return lib, nil
	}
	if err := os.RemoveAll(lib); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(lib, "java"), 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(ddbDir, 0o755); err != nil {
		return "", err
	}
	java, err := javaTool("java")
	if err != nil {
		return "", err
	}
	if java, err = filepath.EvalSymlinks(java); err != nil {
		return "", err
	}
	// LocalStack starts DynamoDB Local in a session of its own, out of
	// reach of a stop aimed at LocalStack's process group: java/21/bin/java
	// runs the host's java with the parent-death signal set (setpriv), so
	// that it dies with LocalStack however LocalStack ends. Without
	// setpriv, java/21 is the host's Java home and Stop's sweep of
	// LocalStack's descendants is all there is.
	javaHome := filepath.Join(lib, "java", "21")
	if setpriv, err := exec.LookPath("setpriv"); err == nil {
		if err := os.MkdirAll(filepath.Join(javaHome, "bin"), 0o755); err != nil {
			return "", err
		}
		wrapper := "#!/bin/sh\n# Generated by the sas rig (internal/dev/rig/localstack_install.go): java that dies with its parent.\n" +
			"exec " + setpriv + " --pdeathsig KILL -- " + java + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(javaHome, "bin", "java"), []byte(wrapper), 0o755); err != nil {
			return "", err
		}
	} else if err := os.Symlink(filepath.Dir(filepath.Dir(java)), javaHome); err != nil {
		return "", err
	}
	for link, target := range map[string]string{
		filepath.Join(ddbDir, "DynamoDBLocal_lib"): ddb.DynamoDBLocalLib,
		filepath.Join(ddbDir, "launcher"):          ddb.DynamoDBLocalLauncher,
	} {
		if err := os.Symlink(target, link); err != nil {
			return "", err
		}
	}

	jars, err := filepath.Glob(filepath.Join(ddb.DynamoDBLocalLib, "*.jar"))
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("no jars in %s", ddb.DynamoDBLocalLib)
	}
	classPath := []string{"launcher/"}
	for _, j := range jars {
		classPath = append(classPath, "DynamoDBLocal_lib/"+filepath.Base(j))
	}
	if err := writeJar(filepath.Join(ddbDir, "DynamoDBLocal.jar"), []manifestAttr{
		{"Main-Class", launcherClass}, {"Class-Path", strings.Join(classPath, " ")},
	}, nil); err != nil {
		return "", err
	}

	// The do-nothing agent, compiled like the launcher.
	javac, err := javaTool("javac")
	if err != nil {
		return "", err
	}
	src := filepath.Join(lib, "agent-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, noAgentClass+".java"), []byte(noAgentSource), 0o644); err != nil {
		return "", err
	}
	if err := RunProcess(ctx, ProcessSpec{Name: "javac", Dir: src, Env: os.Environ(), LogPath: filepath.Join(lib, "install.log"),
		Argv: []string{javac, "--release", strconv.Itoa(MinJavaMajor), "-d", src, filepath.Join(src, noAgentClass+".java")}}); err != nil {
		return "", fmt.Errorf("compiling the DynamoDB Local agent stand-in: %w", err)
	}
	class, err := os.ReadFile(filepath.Join(src, noAgentClass+".class"))
	if err != nil {
		return "", err
	}
	if err := writeJar(filepath.Join(ddbDir, "ddb-local-loader-0.1.jar"), []manifestAttr{{"Premain-Class", noAgentClass}},
		map[string][]byte{noAgentClass + ".class": class}); err != nil {
		return "", err
	}
	return lib, markComplete(lib, "1")
}

type manifestAttr struct{ name, value string }

// writeJar writes a jar with a manifest of attrs and files.
func writeJar(path string, attrs []manifestAttr, files map[string][]byte) error {
	var manifest bytes.Buffer
	manifest.WriteString("Manifest-Version: 1.0\r\n")
	for _, a := range append([]manifestAttr{{"Created-By", "sas rig"}}, attrs...) {
		// Manifest lines are at most 72 bytes; longer ones continue on
		// lines that start with a space.
		line := a.name + ": " + a.value
		for len(line) > 72 {
			manifest.WriteString(line[:72] + "\r\n")
			line = " " + line[72:]
		}
		manifest.WriteString(line + "\r\n")
	}
	manifest.WriteString("\r\n")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	entries := map[string][]byte{"META-INF/MANIFEST.MF": manifest.Bytes()}
	for n, b := range files {
		entries[n] = b
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			return err
		}
		if _, err := w.Write(entries[n]); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
