// Package emulator gives tests the AWS configuration of the emulators that
// `make test` (cmd/rig) started, or of whatever AWS_ENDPOINT_URL points at
// (LocalStack, real AWS). When neither is there, as for a plain `go test
// ./internal/dynamostore` from an editor, it starts them itself through the
// rig (DynamoDB Local and ElasticMQ, installed the first time), once per test
// binary; they die with it. A test that needs them fails loudly when they
// cannot be had: it never skips silently.
package emulator

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dev/rig"
)

var (
	ownOnce sync.Once
	ownErr  error
)

// startOwn starts the rig's emulators for this test binary, once, and points
// the process's environment at them. They are never stopped here: the rig
// starts them as children the kernel kills when the test binary exits
// (rig's childSysProcAttr), which no code of a test binary's can otherwise
// hook without a TestMain in every package.
func startOwn() error {
	ownOnce.Do(func() {
		fmt.Fprintln(os.Stderr, "emulator: no endpoint set; starting DynamoDB Local and ElasticMQ for this test binary (make test starts them once for all)")
		r, err := rig.Start(context.Background(), rig.Options{StopGrace: time.Second})
		if err != nil {
			ownErr = err
			return
		}
		for _, kv := range r.Env() {
			k, v, _ := strings.Cut(kv, "=")
			if err := os.Setenv(k, v); err != nil {
				ownErr = err
				return
			}
		}
		if !awsenv.Emulated() {
			ownErr = fmt.Errorf("the rig started, but its environment names no endpoint")
		}
	})
	return ownErr
}

// Require returns an SDK configuration pointed at the emulators, starting
// them when nothing names any, or fails the test with the reason. Set
// SAS_NO_EMULATORS=1 to skip such tests on purpose (the skip is reported,
// and CI never sets it).
func Require(tb testing.TB) aws.Config {
	tb.Helper()
	if !awsenv.Emulated() && os.Getenv("SAS_REAL_AWS") == "" {
		if os.Getenv("SAS_NO_EMULATORS") == "1" {
			tb.Skip("SAS_NO_EMULATORS=1: skipping a test that needs DynamoDB/SQS")
		}
		if err := startOwn(); err != nil {
			tb.Fatalf("no emulator endpoint, and starting the emulators failed: %v\n"+
				"(`make test` starts them; or set AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS, "+
				"or SAS_REAL_AWS=1 to use real AWS)", err)
		}
	}
	cfg, err := awsenv.Load(context.Background())
	if err != nil {
		tb.Fatalf("emulator config: %v", err)
	}
	return cfg
}

// Name describes where the tests run, for subtest names and logs.
func Name() string {
	switch {
	case os.Getenv("SAS_EMULATOR_NAME") != "":
		return os.Getenv("SAS_EMULATOR_NAME")
	case os.Getenv("AWS_ENDPOINT_URL") != "":
		return "endpoint:" + os.Getenv("AWS_ENDPOINT_URL")
	case awsenv.Emulated():
		return "emulators"
	}
	return "aws"
}

// UniqueName returns a resource name unique to this test run, so tests can
// share one emulator (and one real account) without colliding. It is legal
// as a table name and as a queue name: [A-Za-z0-9_-], at most 80 characters.
func UniqueName(tb testing.TB, prefix string) string {
	tb.Helper()
	n := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, tb.Name())
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return fmt.Sprintf("%s-%s-%d", prefix, strings.Trim(n, "-"), uniq())
}
