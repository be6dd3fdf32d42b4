package rig

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 {
			t.Fatalf("bad port %d", p)
		}
		if seen[p] {
			t.Fatalf("port %d returned twice: %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

func TestEnvPointsTheSDKAtTheEmulators(t *testing.T) {
	r := &Rig{DynamoDBEndpoint: "http://127.0.0.1:1111", SQSEndpoint: "http://127.0.0.1:2222", SQSEmulator: SQSElasticMQ}
	want := []string{
		"AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1111",
		"AWS_ENDPOINT_URL_SQS=http://127.0.0.1:2222",
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"SAS_EMULATOR_NAME=dynamodb-local+elasticmq",
	}
	if got := r.Env(); !slices.Equal(got, want) {
		t.Fatalf("Env() = %q, want %q", got, want)
	}

	// A second SQS emulator is named for the contract suite only.
	r.ExtraSQS = map[string]string{SQSMoto: "http://127.0.0.1:3333"}
	want = append(want, "SAS_RIG_SQS_EXTRA=moto=http://127.0.0.1:3333")
	if got := r.Env(); !slices.Equal(got, want) {
		t.Fatalf("Env() = %q, want %q", got, want)
	}
	extra, err := ParseExtraSQS(FormatExtraSQS(r.ExtraSQS))
	if err != nil || len(extra) != 1 || extra[SQSMoto] != "http://127.0.0.1:3333" {
		t.Fatalf("ParseExtraSQS(FormatExtraSQS(%v)) = %v, %v", r.ExtraSQS, extra, err)
	}
}

func TestParseSQS(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", []string{SQSElasticMQ}, true},
		{"moto", []string{SQSMoto}, true},
		{" ElasticMQ , moto", []string{SQSElasticMQ, SQSMoto}, true},
		{"moto,moto", nil, false},
		{"goaws", nil, false},
	} {
		got, err := parseSQS(c.in)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("parseSQS(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestMergeEnvOverridesAndDropsForeignSessionToken(t *testing.T) {
	base := []string{"PATH=/bin", "AWS_REGION=eu-west-1", "AWS_SESSION_TOKEN=real", "HOME=/root", "AWS_ACCESS_KEY_ID=AKIAREAL"}
	got := MergeEnv(base, buildEnv("http://d", "http://s", SQSElasticMQ))
	m := map[string]string{}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			t.Fatalf("%s set twice in %q", k, got)
		}
		m[k] = v
	}
	for k, want := range map[string]string{
		"PATH": "/bin", "HOME": "/root", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://d", "AWS_ENDPOINT_URL_SQS": "http://s",
	} {
		if m[k] != want {
			t.Errorf("%s = %q, want %q", k, m[k], want)
		}
	}
	if _, ok := m["AWS_SESSION_TOKEN"]; ok {
		t.Errorf("AWS_SESSION_TOKEN kept with the emulators' credentials")
	}
	if got := MergeEnv(base, nil); !slices.Equal(got, base) {
		t.Errorf("MergeEnv(base, nil) = %q, want base unchanged", got)
	}
}

func TestExternalReason(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		external bool
	}{
		{"nothing set", nil, false},
		{"AWS_ENDPOINT_URL", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566"}, true},
		{"both service endpoints", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://a", "AWS_ENDPOINT_URL_SQS": "http://b"}, true},
		{"only DynamoDB", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://a"}, false},
		{"only SQS", map[string]string{"AWS_ENDPOINT_URL_SQS": "http://b"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason := externalReason(func(k string) string { return tc.env[k] })
			if (reason != "") != tc.external {
				t.Fatalf("externalReason = %q, want external=%v", reason, tc.external)
			}
		})
	}
}

func TestStartWithEndpointSetStartsNothing(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	home := filepath.Join(t.TempDir(), "rig-home")
	r, err := Start(context.Background(), Options{Home: home, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if !strings.Contains(r.ExternalReason(), "AWS_ENDPOINT_URL=http://127.0.0.1:4566") {
		t.Errorf("ExternalReason() = %q", r.ExternalReason())
	}
	if env := r.Env(); env != nil {
		t.Errorf("Env() = %q, want nil", env)
	}
	if pids := r.PIDs(); len(pids) != 0 {
		t.Errorf("PIDs() = %v, want none", pids)
	}
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start installed something into %s (stat: %v)", home, err)
	}
	r.Stop() // twice is fine
}

func TestExportLinesQuote(t *testing.T) {
	got := ExportLines([]string{"A=http://127.0.0.1:1/x", "B=it's", "C="})
	want := []string{"export A=http://127.0.0.1:1/x", `export B='it'\''s'`, "export C=''"}
	if !slices.Equal(got, want) {
		t.Fatalf("ExportLines = %q, want %q", got, want)
	}
}

func TestJavaMajor(t *testing.T) {
	for out, want := range map[string]int{
		`openjdk version "17.0.15" 2025-04-15`:                            17,
		`openjdk version "21" 2023-09-19`:                                 21,
		`java version "1.8.0_392"`:                                        8,
		"Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version \"11.0.2\"": 11,
	} {
		got, err := javaMajor(out)
		if err != nil || got != want {
			t.Errorf("javaMajor(%q) = %d, %v; want %d", out, got, err, want)
		}
	}
	if _, err := javaMajor("command not found"); err == nil {
		t.Error("javaMajor accepted garbage")
	}
}

func TestSQLiteNativeLib(t *testing.T) {
	if lib, err := sqliteNativeLib("linux", "amd64"); err != nil || lib != "libsqlite4java-linux-amd64" {
		t.Errorf("linux/amd64: %q, %v", lib, err)
	}
	if _, err := sqliteNativeLib("linux", "arm64"); err == nil {
		t.Error("linux/arm64 should be refused: Maven Central has no native library for it")
	}
}

func TestInstallLockExcludesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "install.lock")
	unlock, err := LockFile(context.Background(), path, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := LockFile(ctx, path, io.Discard); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: err = %v, want a deadline error", err)
	}
	unlock()
	unlock2, err := LockFile(context.Background(), path, io.Discard)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestIsComplete(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if isComplete(dir, "1.0") {
		t.Fatal("complete without a marker")
	}
	if err := markComplete(dir, "1.0"); err != nil {
		t.Fatal(err)
	}
	if !isComplete(dir, "1.0") {
		t.Fatal("not complete after markComplete")
	}
	if isComplete(dir, "2.0") {
		t.Fatal("complete for another version")
	}
	if isComplete(dir, "1.0", key) {
		t.Fatal("complete with a key file missing")
	}
}

func TestStopKillsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	// The shell ignores SIGTERM and its child is a grandchild of the rig:
	// stop must still end both.
	p, err := StartProcess(ProcessSpec{Name: "test", Argv: []string{"sh", "-c", `trap '' TERM; sleep 300 & echo $! > ` + pidFile + `; wait`},
		Dir: dir, Env: os.Environ(), LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0; {
		b, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			p.Stop(time.Second)
			t.Fatal("the test process did not start its child")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop(500 * time.Millisecond)
	if !p.Exited() {
		t.Fatal("stop returned before the process was reaped")
	}
	// The grandchild is not ours to reap; it is gone once init reaps it.
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(grandchild, 0) == nil; {
		if time.Now().After(deadline) {
			_ = syscall.Kill(grandchild, syscall.SIGKILL)
			t.Fatalf("grandchild %d survived stop", grandchild)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWaitReadyReportsAnEarlyExitWithTheLog(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(ProcessSpec{Name: "failing emulator", Argv: []string{"sh", "-c", "echo first; echo 'cannot start: boom'; exit 3"},
		Dir: dir, Env: os.Environ(), LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	never := func(context.Context, string) error { return errors.New("not ready") }
	err = waitReady(context.Background(), p, "http://127.0.0.1:1", never, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "cannot start: boom") || !strings.Contains(err.Error(), "failing emulator") {
		t.Fatalf("waitReady = %v, want the exit reported with the log tail", err)
	}
}

func TestWaitReadyTimesOut(t *testing.T) {
	dir := t.TempDir()
	p, err := StartProcess(ProcessSpec{Name: "silent emulator", Argv: []string{"sleep", "300"}, Dir: dir, Env: os.Environ(), LogPath: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	never := func(context.Context, string) error { return errors.New("connection refused") }
	err = waitReady(context.Background(), p, "http://127.0.0.1:1", never, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("waitReady = %v, want a timeout naming the last probe error", err)
	}
}

func TestStartProcessReportsAMissingBinary(t *testing.T) {
	dir := t.TempDir()
	_, err := StartProcess(ProcessSpec{Name: "ghost", Argv: []string{filepath.Join(dir, "no-such-binary")}, Dir: dir, LogPath: filepath.Join(dir, "log")})
	if err == nil || !strings.Contains(err.Error(), "starting ghost") {
		t.Fatalf("StartProcess = %v, want a clear error", err)
	}
}

func TestIndentTail(t *testing.T) {
	got := indentTail([]byte("a\nb\nc\n"), 2)
	if got != "    b\n    c" {
		t.Fatalf("indentTail = %q", got)
	}
	if got := indentTail(nil, 2); got != "    (log is empty)" {
		t.Fatalf("indentTail(empty) = %q", got)
	}
}

func TestExportLinesQuoteForTheShell(t *testing.T) {
	t.Parallel()
	lines := ExportLines([]string{"A=http://q/1/x", `B={"p":{"url":"u"}}`, "C=it's", "D="})
	require.Equal(t, []string{"export A=http://q/1/x", `export B='{"p":{"url":"u"}}'`, `export C='it'\''s'`, "export D=''"}, lines)
	if _, err := exec.LookPath("sh"); err == nil {
		out, err := exec.Command("sh", "-c", strings.Join(lines, "; ")+`; printf '%s|%s|%s' "$B" "$C" "$D"`).Output()
		require.NoError(t, err)
		require.Equal(t, `{"p":{"url":"u"}}|it's|`, string(out))
	}
}
