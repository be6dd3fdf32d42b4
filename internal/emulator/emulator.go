// Package emulator gives tests the AWS configuration of the emulators that
// `make test` (cmd/rig) started, or of whatever AWS_ENDPOINT_URL points at
// (LocalStack, real AWS). A test that needs them fails loudly when they are
// missing: it never skips silently.
package emulator

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sas-go/sas/internal/awsenv"
)

// Require returns an SDK configuration pointed at the emulators, or fails the
// test with the reason. Set SAS_NO_EMULATORS=1 to skip such tests on purpose
// (the skip is reported, and CI never sets it).
func Require(tb testing.TB) aws.Config {
	tb.Helper()
	if !awsenv.Emulated() && os.Getenv("SAS_REAL_AWS") == "" {
		if os.Getenv("SAS_NO_EMULATORS") == "1" {
			tb.Skip("SAS_NO_EMULATORS=1: skipping a test that needs DynamoDB/SQS")
		}
		tb.Fatalf("no emulator endpoint: run `make test` (it starts DynamoDB Local and the SQS emulator), " +
			"or set AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS, " +
			"or SAS_REAL_AWS=1 to use real AWS")
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
