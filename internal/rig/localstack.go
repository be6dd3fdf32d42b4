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

// LocalStack on the host, without Docker (localstack/README.md): the pinned
// localstack-core from PyPI in a venv, its Lambda functions run by our
// process executor (localstack/process-executor), its DynamoDB served by the
// rig's own DynamoDB Local install.
const (
	// LocalStackVersion is the pinned localstack-core release (PyPI).
	LocalStackVersion = "2026.3.0"
	// LocalStackAccount is the account LocalStack serves with the dummy
	// credentials.
	LocalStackAccount = "000000000000"
	// MinLocalStackPython is the oldest Python that runs LocalStackVersion.
	// Its metadata says 3.10, but it imports warnings.deprecated (3.13):
	// 3.11 fails with a SyntaxError, 3.12 with an ImportError.
	MinLocalStackPython = "3.13"
	// EnvLocalStackPython chooses the Python that builds LocalStack's venv.
	EnvLocalStackPython = "SAS_RIG_LOCALSTACK_PYTHON"
)

// localStackPins are what pip installs: localstack-core with its runtime
// extra, and the pins without which its dependencies resolve to versions it
// does not run with (measured on 2026.3.0).
var localStackPins = []string{
	"localstack-core[runtime]==" + LocalStackVersion,
	"cbor2<6",
	"pyopenssl<26",
	"cryptography<47",
	"service_identity",
}

// LocalStackOptions configure InstallLocalStack and StartLocalStack.
type LocalStackOptions struct {
	// Home is the rig home (default DefaultHome): LocalStack's venv, the
	// executor and the DynamoDB Local layout LocalStack expects go under
	// it, beside DynamoDB Local itself.
	Home string
	// Dir is the run directory: LocalStack's log (localstack.log), its
	// FILESYSTEM_ROOT and TMPDIR (the unzipped functions). Required by
	// StartLocalStack.
	Dir string
	// Port is the 127.0.0.1 port to serve on; 0 picks a free one.
	Port int
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// StartProcess starts LocalStack and the install's commands; default
	// StartProcess.
	StartProcess func(ProcessSpec) (*Process, error)
}

func (o LocalStackOptions) withDefaults() (LocalStackOptions, error) {
	if o.Home == "" {
		h, err := DefaultHome()
		if err != nil {
			return o, err
		}
		o.Home = h
	}
	abs, err := filepath.Abs(o.Home)
	if err != nil {
		return o, err
	}
	o.Home = abs
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.StartProcess == nil {
		o.StartProcess = StartProcess
	}
	return o, nil
}

func (o LocalStackOptions) run(ctx context.Context, spec ProcessSpec) error {
	return runWith(ctx, o.StartProcess, spec)
}

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

const noAgentSource = `// Generated by the sas rig (internal/rig/localstack.go); do not edit.
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
		wrapper := "#!/bin/sh\n# Generated by the sas rig (internal/rig/localstack.go): java that dies with its parent.\n" +
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

// logfWriter adapts a Logf to the io.Writer Options.Log wants.
type logfWriter func(format string, args ...any)

func (f logfWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// RunningLocalStack is a LocalStack started by StartLocalStack.
type RunningLocalStack struct {
	// Endpoint is its base URL, http://127.0.0.1:<port>.
	Endpoint string
	// LogPath is its log, with every function's output.
	LogPath string
	proc    *Process
}

// PID is LocalStack's process id and process group id: DynamoDB Local and
// the function processes it starts are in that group.
func (l *RunningLocalStack) PID() int { return l.proc.PID() }

// Done is closed once LocalStack has ended.
func (l *RunningLocalStack) Done() <-chan struct{} { return l.proc.Done() }

// Stop stops LocalStack with everything it started: its process group
// (the function processes), and its descendants in sessions of their own
// (DynamoDB Local), found before the stop. It keeps its state in memory:
// stopping it forgets every stack.
func (l *RunningLocalStack) Stop() {
	desc := descendants(l.proc.PID())
	l.proc.Stop(10 * time.Second)
	stopStragglers(desc, 3*time.Second)
}

// StartLocalStack starts the installed LocalStack on 127.0.0.1 with the
// process executor, and waits until it answers its health check.
func StartLocalStack(ctx context.Context, inst *LocalStackInstall, opts LocalStackOptions) (*RunningLocalStack, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("starting LocalStack: no run directory")
	}
	root := filepath.Join(opts.Dir, "localstack-fs")
	tmp := filepath.Join(opts.Dir, "localstack-tmp")
	libDir := filepath.Join(root, "var", "lib", "localstack", "lib")
	for _, d := range []string{libDir, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"java", "dynamodb-local"} {
		link := filepath.Join(libDir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(inst.Lib, name), link); err != nil {
			return nil, err
		}
	}
	tries := 3
	if opts.Port != 0 {
		tries = 1
	}
	var lastErr error
	for try := 0; try < tries; try++ {
		port := opts.Port
		if port == 0 {
			ports, err := freePorts(1)
			if err != nil {
				return nil, err
			}
			port = ports[0]
		}
		hostPort := "127.0.0.1:" + strconv.Itoa(port)
		env := append(EnvWithoutAWS(os.Environ()),
			"GATEWAY_LISTEN="+hostPort,
			// The default server (twisted) listens on 0.0.0.0 whatever
			// GATEWAY_LISTEN says.
			"GATEWAY_SERVER=hypercorn",
			// Queue URLs name this address, not localhost.localstack.cloud
			// (which does not resolve here), in AWS's path form
			// /<account>/<name>: "off" does that. ("path" makes them
			// /queue/<region>/<account>/<name>, which the scheduler does
			// not take for a queue at its SDK's endpoint when it checks a
			// replyTo: internal/config ReplyToAllowed.)
			"LOCALSTACK_HOST="+hostPort,
			"SQS_ENDPOINT_STRATEGY=off",
			// Machines with a /.dockerenv are taken for LocalStack's own
			// container otherwise.
			"OVERRIDE_IN_DOCKER=0",
			"FILESYSTEM_ROOT="+root,
			"TMPDIR="+tmp,
			"LAMBDA_RUNTIME_EXECUTOR=process",
			"PYTHONPATH="+inst.Executor,
			// No DNS server (it binds port 53 on all interfaces), no
			// certificate download, no analytics.
			"DNS_ADDRESS=0",
			"SKIP_SSL_CERT_DOWNLOAD=1",
			"DISABLE_EVENTS=1",
			// An idle SQS event source is polled at least every second
			// (default: backs off to 10 s), so a reply is not left waiting.
			"LAMBDA_EVENT_SOURCE_MAPPING_MAX_BACKOFF_ON_EMPTY_POLL_SEC=1",
			"AWS_DEFAULT_REGION="+Region,
		)
		logPath := filepath.Join(opts.Dir, "localstack.log")
		p, err := opts.StartProcess(ProcessSpec{Name: "localstack", Dir: opts.Dir, Env: env, LogPath: logPath,
			Argv: []string{inst.Python, "-m", "localstack.runtime.main"}})
		if err != nil {
			return nil, err
		}
		ls := &RunningLocalStack{proc: p, Endpoint: "http://" + hostPort, LogPath: logPath}
		if err := ls.waitHealthy(ctx, 90*time.Second); err != nil {
			p.Stop(5 * time.Second)
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return ls, nil
	}
	return nil, fmt.Errorf("LocalStack did not start: %w", lastErr)
}

func (l *RunningLocalStack) waitHealthy(ctx context.Context, within time.Duration) error {
	return l.proc.WaitHealthy(ctx, l.Endpoint+"/_localstack/health", within)
}
