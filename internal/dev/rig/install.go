package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Installation locates what Install put under the rig's home.
type Installation struct {
	Home string
	// DynamoDBLocalLib holds DynamoDBLocal-<version>.jar, the jars it
	// depends on and the sqlite4java native libraries, as Maven resolved
	// them.
	DynamoDBLocalLib string
	// DynamoDBLocalLauncher holds the compiled launcher that binds DynamoDB
	// Local to 127.0.0.1; "" when no javac was available at install time.
	DynamoDBLocalLauncher string
	// ElasticMQLib holds elasticmq-server and the jars it depends on, as
	// Maven resolved them.
	ElasticMQLib string
	// MotoServer is the moto_server script in the rig's Python venv.
	MotoServer string
}

const completeMarker = ".sas-rig-complete"

func dynamoDBLocalDir(home string) string {
	return filepath.Join(home, "dynamodb-local-"+DynamoDBLocalVersion)
}

func elasticMQDir(home string) string { return filepath.Join(home, "elasticmq-"+ElasticMQVersion) }

func motoDir(home string) string { return filepath.Join(home, "moto-"+MotoVersion) }

// elasticMQJar is the server jar whose presence says the install is whole.
func elasticMQJar(lib string) string {
	return filepath.Join(lib, "elasticmq-server_2.13-"+ElasticMQVersion+".jar")
}

func installation(home string) *Installation {
	ddb := dynamoDBLocalDir(home)
	inst := &Installation{
		Home:             home,
		DynamoDBLocalLib: filepath.Join(ddb, "lib"),
		ElasticMQLib:     filepath.Join(elasticMQDir(home), "lib"),
		MotoServer:       filepath.Join(motoDir(home), "venv", "bin", "moto_server"),
	}
	if launcher := filepath.Join(ddb, launcherDirName()); fileExists(filepath.Join(launcher, launcherClass+".class")) {
		inst.DynamoDBLocalLauncher = launcher
	}
	return inst
}

// Install makes sure the pinned DynamoDB Local and the SQS emulators
// opts.SQS names are installed under opts.Home, installing what is missing.
// It holds a file lock while it works, so concurrent rigs (parallel test
// runs, two terminals) neither corrupt the install nor duplicate it. An
// install that was interrupted is redone.
func Install(ctx context.Context, opts Options) (*Installation, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Home, 0o755); err != nil {
		return nil, fmt.Errorf("creating rig home: %w", err)
	}
	unlock, err := LockFile(ctx, filepath.Join(opts.Home, "install.lock"), opts.Log)
	if err != nil {
		return nil, err
	}
	defer unlock()

	inst := installation(opts.Home)
	ddbDone := isComplete(dynamoDBLocalDir(opts.Home), DynamoDBLocalVersion,
		filepath.Join(inst.DynamoDBLocalLib, "DynamoDBLocal-"+DynamoDBLocalVersion+".jar"))
	if ddbDone && inst.DynamoDBLocalLauncher == "" {
		// Installed by a rig with another launcher, or without javac:
		// (re)build the launcher, which takes a second.
		dir := dynamoDBLocalDir(opts.Home)
		if err := buildLauncher(ctx, dir, inst.DynamoDBLocalLib, filepath.Join(dir, "install.log")); err != nil && !errors.Is(err, errNoJavac) {
			return nil, fmt.Errorf("installing DynamoDB Local: %w", err)
		}
		inst = installation(opts.Home)
	}

	type install struct {
		what, from, dir string
		run             func(context.Context, Options) error
	}
	var todo []install
	if !ddbDone {
		todo = append(todo, install{"DynamoDB Local " + DynamoDBLocalVersion, "Maven Central", dynamoDBLocalDir(opts.Home), installDynamoDBLocal})
	}
	for _, sqs := range opts.SQS {
		switch sqs {
		case SQSElasticMQ:
			if !isComplete(elasticMQDir(opts.Home), ElasticMQVersion, elasticMQJar(inst.ElasticMQLib)) {
				todo = append(todo, install{"ElasticMQ " + ElasticMQVersion, "Maven Central", elasticMQDir(opts.Home), installElasticMQ})
			}
		case SQSMoto:
			// The venv's python is a symlink to the Python that built it:
			// if that Python went away (a pyenv version removed), rebuild
			// the venv.
			if !isComplete(motoDir(opts.Home), MotoVersion, inst.MotoServer, filepath.Join(motoDir(opts.Home), "venv", "bin", "python")) {
				todo = append(todo, install{"moto[server] " + MotoVersion, "PyPI", motoDir(opts.Home), installMoto})
			}
		}
	}
	if len(todo) == 0 {
		return inst, nil
	}

	// The installs mostly wait on the network: run them side by side. Two
	// Maven runs share the rig's local repository; Maven's own file locks
	// keep that safe.
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	begin := time.Now()
	for i, in := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			fmt.Fprintf(opts.Log, "rig: installing %s from %s into %s\n", in.what, in.from, in.dir)
			if errs[i] = in.run(ctx, opts); errs[i] == nil {
				fmt.Fprintf(opts.Log, "rig: %s installed in %s\n", in.what, time.Since(t).Round(100*time.Millisecond))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "rig: install finished in %s\n", time.Since(begin).Round(100*time.Millisecond))
	return installation(opts.Home), nil
}

// isComplete reports whether dir holds a finished install of version: the
// marker is written last, and the key files must still be there.
func isComplete(dir, version string, files ...string) bool {
	b, err := os.ReadFile(filepath.Join(dir, completeMarker))
	if err != nil || strings.TrimSpace(string(b)) != version {
		return false
	}
	for _, f := range files {
		if !fileExists(f) {
			return false
		}
	}
	return true
}

func markComplete(dir, version string) error {
	if err := os.WriteFile(filepath.Join(dir, completeMarker), []byte(version+"\n"), 0o644); err != nil {
		return fmt.Errorf("marking install complete: %w", err)
	}
	return nil
}

// mavenPOM is a throwaway project whose only purpose is to let Maven resolve
// one artifact with all its dependencies (for DynamoDB Local, including the
// sqlite4java native libraries: dependencies of type so/dylib/dll).
const mavenPOM = `<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by the sas rig (internal/dev/rig/install.go): resolves %[2]s:%[3]s. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.sas-rig</groupId>
  <artifactId>%[1]s</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>%[2]s</groupId>
      <artifactId>%[3]s</artifactId>
      <version>%[4]s</version>
    </dependency>
  </dependencies>
</project>
`

// mavenArtifact is what installWithMaven resolves.
type mavenArtifact struct {
	name                     string // for messages: "DynamoDB Local"
	group, artifact, version string
	dir                      string // install directory, cleared first
	jar                      string // file name Maven must have put in dir/lib
}

// installWithMaven clears a.dir and copies a's jar and its runtime
// dependencies into a.dir/lib with the pinned maven-dependency-plugin. It
// checks for Java and Maven first, so a missing tool is named rather than
// left to a failing build.
func installWithMaven(ctx context.Context, opts Options, a mavenArtifact) (lib, logPath string, err error) {
	java, err := javaTool("java")
	if err != nil {
		return "", "", fmt.Errorf("installing %s: %w", a.name, err)
	}
	if err := checkJava(ctx, java); err != nil {
		return "", "", fmt.Errorf("installing %s: %w", a.name, err)
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", "", fmt.Errorf("installing %s: mvn (Apache Maven) not found on PATH; install it (Debian: apt-get install maven)", a.name)
	}
	if err := os.RemoveAll(a.dir); err != nil {
		return "", "", fmt.Errorf("clearing %s: %w", a.dir, err)
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return "", "", fmt.Errorf("creating %s: %w", a.dir, err)
	}
	pom := fmt.Sprintf(mavenPOM, filepath.Base(a.dir), a.group, a.artifact, a.version)
	if err := os.WriteFile(filepath.Join(a.dir, "pom.xml"), []byte(pom), 0o644); err != nil {
		return "", "", fmt.Errorf("writing pom: %w", err)
	}
	logPath = filepath.Join(a.dir, "install.log")
	lib = filepath.Join(a.dir, "lib")
	// The rig keeps its own Maven repository so that the install is
	// self-contained: removing the rig home resets everything.
	err = RunProcess(ctx, ProcessSpec{Name: "mvn", Dir: a.dir, Env: os.Environ(), LogPath: logPath, Argv: []string{mvn, "-B", "-ntp",
		"-Dmaven.repo.local=" + filepath.Join(opts.Home, "m2"),
		"org.apache.maven.plugins:maven-dependency-plugin:" + MavenDependencyPluginVersion + ":copy-dependencies",
		"-DincludeScope=runtime",
		"-DoutputDirectory=" + lib}})
	if err != nil {
		return "", "", fmt.Errorf("installing %s with Maven: %w", a.name, err)
	}
	if !fileExists(filepath.Join(lib, a.jar)) {
		return "", "", fmt.Errorf("installing %s: Maven finished but %s has no %s; see %s", a.name, lib, a.jar, logPath)
	}
	return lib, logPath, nil
}

func installDynamoDBLocal(ctx context.Context, opts Options) error {
	native, err := sqliteNativeLib(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("installing DynamoDB Local: %w", err)
	}
	dir := dynamoDBLocalDir(opts.Home)
	lib, logPath, err := installWithMaven(ctx, opts, mavenArtifact{
		name: "DynamoDB Local", group: "com.amazonaws", artifact: "DynamoDBLocal", version: DynamoDBLocalVersion,
		dir: dir, jar: "DynamoDBLocal-" + DynamoDBLocalVersion + ".jar",
	})
	if err != nil {
		return err
	}
	if matches, _ := filepath.Glob(filepath.Join(lib, native+"-*")); len(matches) == 0 {
		return fmt.Errorf("installing DynamoDB Local: no %s native library in %s; see %s", native, lib, logPath)
	}

	if err := buildLauncher(ctx, dir, lib, logPath); err != nil {
		if !errors.Is(err, errNoJavac) {
			return fmt.Errorf("installing DynamoDB Local: %w", err)
		}
		fmt.Fprintf(opts.Log, "rig: WARNING: %v: DynamoDB Local will listen on all interfaces, not only 127.0.0.1\n", err)
	}
	return markComplete(dir, DynamoDBLocalVersion)
}

// installElasticMQ installs the ElasticMQ server. Unlike DynamoDB Local it
// needs no launcher: its config file chooses the address it binds.
func installElasticMQ(ctx context.Context, opts Options) error {
	dir := elasticMQDir(opts.Home)
	_, _, err := installWithMaven(ctx, opts, mavenArtifact{
		name: "ElasticMQ", group: "org.elasticmq", artifact: "elasticmq-server_2.13", version: ElasticMQVersion,
		dir: dir, jar: filepath.Base(elasticMQJar("")),
	})
	if err != nil {
		return err
	}
	return markComplete(dir, ElasticMQVersion)
}

var errNoJavac = errors.New("javac not found (a JDK, not only a JRE, is needed to bind DynamoDB Local to 127.0.0.1)")

// buildLauncher compiles the launcher (see launcher.go) against the
// installed jars.
func buildLauncher(ctx context.Context, dir, lib, logPath string) error {
	javac, err := javaTool("javac")
	if err != nil {
		return errNoJavac
	}
	out := filepath.Join(dir, launcherDirName())
	src := out + "-src"
	for _, d := range []string{src, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	file := filepath.Join(src, launcherClass+".java")
	if err := os.WriteFile(file, []byte(launcherSource), 0o644); err != nil {
		return fmt.Errorf("writing launcher source: %w", err)
	}
	// --release keeps the class loadable by the java that runs it even when
	// javac comes from a newer JDK.
	err = RunProcess(ctx, ProcessSpec{Name: "javac", Dir: dir, Env: os.Environ(), LogPath: logPath, Argv: []string{javac,
		"--release", strconv.Itoa(MinJavaMajor), "-cp", filepath.Join(lib, "*"), "-d", out, file}})
	if err != nil {
		return fmt.Errorf("compiling the DynamoDB Local launcher: %w", err)
	}
	return nil
}

func installMoto(ctx context.Context, opts Options) error {
	python, err := pythonPath(ctx)
	if err != nil {
		return fmt.Errorf("installing moto: %w", err)
	}
	dir := motoDir(opts.Home)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	logPath := filepath.Join(dir, "install.log")
	venv := filepath.Join(dir, "venv")
	// A venv is not relocatable (its scripts name its python by absolute
	// path), so it is built in place and only the marker says it is done.
	if err := RunProcess(ctx, ProcessSpec{Name: "python -m venv", Dir: dir, Env: os.Environ(), LogPath: logPath, Argv: []string{python, "-m", "venv", venv}}); err != nil {
		return fmt.Errorf("creating the moto venv (Debian needs the python3-venv package): %w", err)
	}
	env := append(os.Environ(), "PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	vpython := filepath.Join(venv, "bin", "python")
	if err := RunProcess(ctx, ProcessSpec{Name: "pip install", Dir: dir, Env: env, LogPath: logPath, Argv: []string{vpython, "-m", "pip", "install", "moto[server]==" + MotoVersion}}); err != nil {
		return fmt.Errorf("installing moto with pip: %w", err)
	}
	// Record what pip resolved: only moto itself is pinned.
	if err := RunProcess(ctx, ProcessSpec{Name: "pip freeze", Dir: dir, Env: env, LogPath: filepath.Join(dir, "freeze.txt"), Argv: []string{vpython, "-m", "pip", "freeze"}}); err != nil {
		return fmt.Errorf("recording the moto venv's packages: %w", err)
	}
	if !fileExists(filepath.Join(venv, "bin", "moto_server")) {
		return fmt.Errorf("installing moto: pip finished but there is no moto_server in %s; see %s", venv, logPath)
	}
	return markComplete(dir, MotoVersion)
}

// javaTool finds java or javac: in $JAVA_HOME/bin when JAVA_HOME is set,
// else on PATH.
func javaTool(name string) (string, error) {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		p := filepath.Join(home, "bin", name)
		if fileExists(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found in $JAVA_HOME/bin or on PATH; DynamoDB Local %s and ElasticMQ %s need Java %d+ (Debian: apt-get install openjdk-17-jdk-headless)",
			name, DynamoDBLocalVersion, ElasticMQVersion, MinJavaMajor)
	}
	return p, nil
}

func checkJava(ctx context.Context, java string) error {
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %s -version: %w: %s", java, err, out)
	}
	major, err := javaMajor(string(out))
	if err != nil {
		return fmt.Errorf("%s: %w", java, err)
	}
	if major < MinJavaMajor {
		return fmt.Errorf("%s is Java %d; DynamoDB Local %s needs Java %d+", java, major, DynamoDBLocalVersion, MinJavaMajor)
	}
	return nil
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

// javaMajor parses the output of `java -version`: `version "17.0.15"`, or
// the old `version "1.8.0_392"` scheme.
func javaMajor(versionOutput string) (int, error) {
	m := javaVersionRE.FindStringSubmatch(versionOutput)
	if m == nil {
		return 0, fmt.Errorf("cannot read the Java version from %q", strings.TrimSpace(versionOutput))
	}
	major, _ := strconv.Atoi(m[1])
	if major == 1 && m[2] != "" {
		major, _ = strconv.Atoi(m[2])
	}
	return major, nil
}

// pythonPath finds the Python that builds the moto venv: $SAS_RIG_PYTHON,
// else python3 on PATH. moto 5 needs Python 3.9+.
func pythonPath(ctx context.Context) (string, error) {
	python := os.Getenv("SAS_RIG_PYTHON")
	if python == "" {
		p, err := exec.LookPath("python3")
		if err != nil {
			return "", errors.New("python3 not found on PATH (set SAS_RIG_PYTHON to choose one); moto needs Python 3.9+")
		}
		python = p
	}
	out, err := exec.CommandContext(ctx, python, "-c", "import sys; print('%d %d' % sys.version_info[:2])").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("running %s: %w: %s", python, err, out)
	}
	var maj, minor int
	if _, err := fmt.Sscan(string(out), &maj, &minor); err != nil {
		return "", fmt.Errorf("reading the version of %s from %q: %w", python, out, err)
	}
	if maj < 3 || maj == 3 && minor < 9 {
		return "", fmt.Errorf("%s is Python %d.%d; moto %s needs 3.9+ (set SAS_RIG_PYTHON)", python, maj, minor, MotoVersion)
	}
	return python, nil
}

// sqliteNativeLib names the sqlite4java native library DynamoDB Local needs
// on this platform. Maven Central carries only these builds; on other
// platforms (e.g. linux/arm64) DynamoDB Local from Maven cannot store data.
func sqliteNativeLib(goos, goarch string) (string, error) {
	switch {
	case goos == "linux" && goarch == "amd64":
		return "libsqlite4java-linux-amd64", nil
	case goos == "linux" && goarch == "386":
		return "libsqlite4java-linux-i386", nil
	case goos == "darwin":
		return "libsqlite4java-osx", nil
	}
	return "", fmt.Errorf("DynamoDB Local's sqlite4java dependency on Maven Central has no native library for %s/%s", goos, goarch)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
