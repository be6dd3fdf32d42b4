package rig

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// emulatorSpec says how to start one emulator and how to tell it is ready.
type emulatorSpec struct {
	name  string
	setup func(port int) error // optional: runs before each start
	argv  func(port int) []string
	dir   string
	env   []string
	probe func(ctx context.Context, endpoint string) error
}

func dynamoDBLocalSpec(inst *Installation) emulatorSpec {
	return emulatorSpec{
		name: "DynamoDB Local",
		argv: func(port int) []string {
			java, err := javaTool("java")
			if err != nil {
				java = "java" // the start then fails with exec's own "not found"
			}
			classpath := filepath.Join(inst.DynamoDBLocalLib, "*")
			main := "com.amazonaws.services.dynamodbv2.local.main.ServerRunner"
			if inst.DynamoDBLocalLauncher != "" {
				classpath = inst.DynamoDBLocalLauncher + string(os.PathListSeparator) + classpath
				main = launcherClass
			}
			// The jars are started by class path, not -jar: Maven names
			// them differently from the DynamoDBLocal_lib/ layout that
			// the jar's manifest expects.
			return []string{java,
				"-Djava.library.path=" + inst.DynamoDBLocalLib,
				"-Dsas.rig.host=127.0.0.1",
				"-cp", classpath, main,
				"-inMemory", "-sharedDb", "-disableTelemetry",
				"-port", fmt.Sprint(port)}
		},
		dir:   inst.DynamoDBLocalLib,
		env:   os.Environ(),
		probe: probeDynamoDB,
	}
}

func motoSpec(inst *Installation) emulatorSpec {
	return emulatorSpec{
		name: "moto (SQS)",
		argv: func(port int) []string {
			return []string{inst.MotoServer, "-H", "127.0.0.1", "-p", fmt.Sprint(port)}
		},
		dir:   filepath.Dir(inst.MotoServer),
		env:   append(os.Environ(), "PYTHONUNBUFFERED=1"),
		probe: probeSQS,
	}
}

// startEmulator starts spec on a free port and waits until it answers. A
// start that fails on a port taken meanwhile is retried on another one
// (onFreePort).
func startEmulator(ctx context.Context, spec emulatorSpec, logDir string, opts Options) (*Process, string, error) {
	logPath := filepath.Join(logDir, strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(strings.ToLower(spec.name))+".log")
	var p *Process
	var endpoint string
	err := onFreePort(ctx, 0, func(port int) (again bool, err error) {
		if spec.setup != nil {
			if err := spec.setup(port); err != nil {
				return false, err
			}
		}
		begin := time.Now()
		p, err = StartProcess(ProcessSpec{Name: spec.name, Argv: spec.argv(port), Dir: spec.dir, Env: spec.env, LogPath: logPath})
		if err != nil {
			return false, err
		}
		endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
		if err = waitReady(ctx, p, endpoint, spec.probe, opts.ReadyTimeout); err == nil {
			fmt.Fprintf(opts.Log, "rig: %s ready on %s in %s (pid %d)\n", spec.name, endpoint, time.Since(begin).Round(10*time.Millisecond), p.PID())
			return false, nil
		}
		p.Stop(5 * time.Second)
		if portTaken(logPath) {
			fmt.Fprintf(opts.Log, "rig: %s: port %d was taken meanwhile; trying another\n", spec.name, port)
			return true, err
		}
		return false, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", spec.name, err)
	}
	return p, endpoint, nil
}

// portTries is how many free ports a start tries before it gives up.
const portTries = 3

// onFreePort calls start with a port until it succeeds: the fixed port
// once, or (fixed 0) a free port, then another, up to portTries in all,
// while start says its failure may be the port's (again) and ctx lives. A
// free port is free when we look and can be taken by another process
// before the emulator binds it.
func onFreePort(ctx context.Context, fixed int, start func(port int) (again bool, err error)) error {
	tries := portTries
	if fixed != 0 {
		tries = 1
	}
	var err error
	for try := 0; try < tries; try++ {
		port := fixed
		if port == 0 {
			ports, perr := freePorts(1)
			if perr != nil {
				return perr
			}
			port = ports[0]
		}
		again := false
		if again, err = start(port); err == nil || !again || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func portTaken(logPath string) bool {
	b, _ := os.ReadFile(logPath)
	s := string(b)
	return strings.Contains(s, "Address already in use") || strings.Contains(s, "BindException")
}

// waitReady polls probe until it succeeds, the process exits, or timeout.
func waitReady(parent context.Context, p *Process, endpoint string, probe func(context.Context, string) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if p.Exited() {
			return p.ExitError()
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		last = probe(pctx, endpoint)
		pcancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p.Exited() {
				return p.ExitError()
			}
			if parent.Err() != nil {
				return fmt.Errorf("waiting for %s: %w", endpoint, parent.Err())
			}
			return fmt.Errorf("no answer on %s within %s (last probe: %v); last lines of %s:\n%s",
				endpoint, timeout, last, p.LogPath(), TailFile(p.LogPath(), 30))
		case <-p.Done():
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct ports that were free on 127.0.0.1. All n
// listeners are open at once so the kernel cannot hand out one port twice.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// The readiness probes make a real API call with stdlib HTTP (the rig needs
// no SDK). Neither emulator checks signatures, but both read the region and
// service from the Authorization header's credential scope.
var probeClient = &http.Client{Timeout: 5 * time.Second}

func awsJSONCall(ctx context.Context, endpoint, service, target string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", strings.NewReader("{}"))
	if err != nil {
		return "", err
	}
	now := time.Now().UTC()
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("X-Amz-Date", now.Format("20060102T150405Z"))
	req.Header.Set("Authorization", fmt.Sprintf(
		"AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=%s",
		AccessKeyID, now.Format("20060102"), Region, service, strings.Repeat("0", 64)))
	resp, err := probeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d: %s", target, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

func probeDynamoDB(ctx context.Context, endpoint string) error {
	body, err := awsJSONCall(ctx, endpoint, "dynamodb", "DynamoDB_20120810.ListTables")
	if err != nil {
		return err
	}
	if !strings.Contains(body, "TableNames") {
		return fmt.Errorf("ListTables: unexpected answer %q", body)
	}
	return nil
}

func probeSQS(ctx context.Context, endpoint string) error {
	body, err := awsJSONCall(ctx, endpoint, "sqs", "AmazonSQS.ListQueues")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(strings.TrimSpace(body), "{") {
		return fmt.Errorf("ListQueues: unexpected answer %q", body)
	}
	return nil
}
