package rig

import (
	"fmt"
	"slices"
	"strings"
)

// Environment variable names the rig reads or sets.
const (
	EnvEndpoint         = "AWS_ENDPOINT_URL"
	EnvEndpointDynamoDB = "AWS_ENDPOINT_URL_DYNAMODB"
	EnvEndpointSQS      = "AWS_ENDPOINT_URL_SQS"
	EnvEmulatorName     = "SAS_EMULATOR_NAME"
	EnvHome             = "SAS_RIG_HOME"
)

// Region and credentials the emulators are used with. Neither emulator checks
// signatures, but the SDK refuses to sign without credentials.
const (
	Region          = "us-east-1"
	AccessKeyID     = "test"
	SecretAccessKey = "test"
)

// externalReason tells why the rig should start nothing because the
// environment already points the SDK somewhere (LocalStack, MiniStack, an
// outer rig, real AWS through a proxy). It returns "" when the rig should
// start its emulators.
func externalReason(getenv func(string) string) string {
	if v := getenv(EnvEndpoint); v != "" {
		return fmt.Sprintf("%s=%s is set", EnvEndpoint, v)
	}
	ddb, sqs := getenv(EnvEndpointDynamoDB), getenv(EnvEndpointSQS)
	if ddb != "" && sqs != "" {
		// An outer `rig exec` or `rig up` (or a hand-made setup): reuse it
		// rather than starting a second pair of emulators.
		return fmt.Sprintf("%s=%s and %s=%s are set", EnvEndpointDynamoDB, ddb, EnvEndpointSQS, sqs)
	}
	return ""
}

// buildEnv returns the variables that point the AWS SDK at the given
// endpoints, in a stable order.
func buildEnv(dynamoDBEndpoint, sqsEndpoint, sqsEmulator string) []string {
	return []string{
		EnvEndpointDynamoDB + "=" + dynamoDBEndpoint,
		EnvEndpointSQS + "=" + sqsEndpoint,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		EnvEmulatorName + "=" + EmulatorName(sqsEmulator),
	}
}

// MergeEnv returns base with every variable of overrides set (replacing any
// earlier value). When overrides sets credentials, a session token in base
// is dropped: it belongs to other credentials and would only confuse the SDK.
func MergeEnv(base, overrides []string) []string {
	set := make(map[string]bool, len(overrides))
	for _, kv := range overrides {
		set[envKey(kv)] = true
	}
	if set["AWS_ACCESS_KEY_ID"] {
		set["AWS_SESSION_TOKEN"] = true
	}
	out := make([]string, 0, len(base)+len(overrides))
	for _, kv := range base {
		if !set[envKey(kv)] {
			out = append(out, kv)
		}
	}
	return append(out, overrides...)
}

// ExportLines renders env as POSIX shell export statements.
func ExportLines(env []string) []string {
	lines := make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		lines = append(lines, "export "+k+"="+shellQuote(v))
	}
	return lines
}

func envKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

func shellQuote(s string) string {
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			slices.Contains([]rune("-_./:+@%,="), r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// FormatExtraSQS renders name=endpoint pairs for EnvSQSExtra, sorted by name.
func FormatExtraSQS(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for name, ep := range m {
		pairs = append(pairs, name+"="+ep)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// ParseExtraSQS reads an EnvSQSExtra value ("" gives an empty map).
func ParseExtraSQS(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, ep, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || name == "" || ep == "" {
			return nil, fmt.Errorf("%s: %q is not name=endpoint", EnvSQSExtra, pair)
		}
		out[name] = ep
	}
	return out, nil
}
