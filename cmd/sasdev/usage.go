package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
)

// printUsage prints the export lines and ready commands.
func (s *server) printUsage() {
	exports, withheld := awsExports(os.Getenv)
	for _, k := range exportedVars {
		exports = append(exports, k+"="+s.env[k])
	}
	exports = append(exports, "SAS_STATUS_QUEUE_URL="+s.statusURL)
	if s.simURL != "" {
		exports = append(exports, "SAS_SIM_URL="+s.simURL)
	}
	out := s.con
	out.println("# sasdev: the system's configuration, for sasctl and the aws CLI in another shell")
	for _, l := range rig.ExportLines(exports) {
		out.println(l)
	}
	if len(withheld) > 0 {
		out.println("# not shown (your shell's own, which hold secrets): " + strings.Join(withheld, ", "))
	}

	names := slices.Sorted(maps.Keys(s.reg))
	wf := names[0]
	payload := s.opts.Payload
	if payload == "" {
		payload = "{}"
		if s.opts.Workflows == "" {
			payload = `{"amount":42}`
		} else if b, err := os.ReadFile(filepath.Join(filepath.Dir(s.opts.Workflows), SamplePayloadFile)); err == nil {
			// The workflows' own sample order, beside their file.
			var compact bytes.Buffer
			if json.Compact(&compact, b) == nil {
				payload = compact.String()
			}
		}
	}
	body := fmt.Sprintf(`{"orderId":"order-1","workflow":%q,"payload":%s,"replyTo":%q}`, wf, payload, s.statusURL)
	sqsEndpoint := os.Getenv("AWS_ENDPOINT_URL_SQS")
	if sqsEndpoint == "" {
		sqsEndpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	endpoint := ""
	if sqsEndpoint != "" {
		endpoint = " --endpoint-url " + sqsEndpoint
	}
	out.println("# submit an order (workflows: " + strings.Join(names, ", ") + "), then look at it and at its statuses:")
	out.println("aws sqs send-message" + endpoint + " --queue-url " + s.env["SAS_INTAKE_QUEUE_URL"] + " --message-body " + shellQuote(body))
	// Commands that work from the user's own module, not only in the clone.
	out.println("# sasctl: " + installSasctl())
	out.println("sasctl submit -order order-2 -workflow " + wf + " -payload " + shellQuote(payload) + ` -reply-to "$SAS_STATUS_QUEUE_URL"`)
	out.println("sasctl show order-1")
	out.println("aws sqs receive-message" + endpoint + ` --queue-url "$SAS_STATUS_QUEUE_URL" --max-number-of-messages 10`)
	if s.consoleURL != "" {
		out.println("# the console (docs/console.md): open it in a browser, or go run ./cmd/sasctl console")
		out.println("# console: " + s.consoleURL)
	}
	for _, a := range agentsOf(s.reg) {
		how := "program " + s.rel(s.procs.dirOf(a)) + ", log " + s.rel(filepath.Join(s.opts.Dir, "agent-"+a+".log"))
		if slices.Contains(s.builtin, a) {
			how = "built-in HTTP agent in this process, calling the simulator at " + s.simURL + ", log " + s.rel(filepath.Join(s.opts.Dir, "agent-"+a+".log"))
		}
		s.con.info("agent %s: %s", a, how)
	}
}

// exportedVars are the deployment's variables the server prints as export
// lines (the README's sample shows them; TestREADMEDevSample).
var exportedVars = []string{"SAS_ORDERS_TABLE", "SAS_STATE_TABLE", "SAS_INDEX_SHARDS", "SAS_INTAKE_QUEUE_URL", "SAS_SCHEDULER_QUEUE_URL", "SAS_CONTROL_QUEUE_URL"}

// rel shows a path relative to the working directory when it is under it.
func (s *server) rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// awsExports are the AWS variables another shell needs to reach what this
// one uses, and the names of those withheld: a secret key other than the
// emulators' dummy one (rig.SecretAccessKey) is the shell's own and is
// never printed, nor is an endpoint whose URL carries credentials
// (sas.Redact); the other shell has them already, or must be given them by
// its owner.
func awsExports(getenv func(string) string) (exports, withheld []string) {
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		v := getenv(k)
		switch {
		case v == "":
		case k == "AWS_SECRET_ACCESS_KEY" && v != rig.SecretAccessKey, k == "AWS_SESSION_TOKEN", sas.Redact(v) != v:
			withheld = append(withheld, k)
		default:
			exports = append(exports, k+"="+v)
		}
	}
	if r := getenv("AWS_REGION"); r != "" && getenv("AWS_DEFAULT_REGION") == "" {
		exports = append(exports, "AWS_DEFAULT_REGION="+r) // what version 1 of the aws CLI reads
	}
	return exports, withheld
}
