package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestREADMEDevSample: every line of the README's sample `make dev` output
// is a line the server prints, in the form the code prints it (ports,
// paths, times vary), and the sample shows each kind of line and every
// exported variable. An order's line is rebuilt with finishLine itself.
func TestREADMEDevSample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "<!-- make dev sample -->\n```\n")
	require.True(t, ok, "the README has a make dev sample")
	sample, _, _ := strings.Cut(rest, "```")

	kinds := map[string]*regexp.Regexp{
		"heading":  regexp.MustCompile(`^# sasdev: the system's configuration, for sasctl and the aws CLI in another shell$`),
		"export":   regexp.MustCompile(`^export ([A-Z_0-9]+)=\S+$`),
		"submit":   regexp.MustCompile(`^# submit an order \(workflows: [^)]+\), then look at it and at its statuses:$`),
		"send":     regexp.MustCompile(`^aws sqs send-message --endpoint-url \S+ --queue-url \S+ --message-body '\{"orderId":"order-1","workflow":"[^"]+","payload":.*,"replyTo":"\S+"\}'$`),
		"install":  regexp.MustCompile(`^# sasctl: ` + regexp.QuoteMeta(installSasctl()) + `$`),
		"sasctl":   regexp.MustCompile(`^sasctl submit -order order-2 -workflow \S+ -payload '.*' -reply-to "\$SAS_STATUS_QUEUE_URL"$`),
		"show":     regexp.MustCompile(`^sasctl show order-1$`),
		"receive":  regexp.MustCompile(`^aws sqs receive-message --endpoint-url \S+ --queue-url "\$SAS_STATUS_QUEUE_URL" --max-number-of-messages 10$`),
		"started":  regexp.MustCompile(`^sasdev: started agent \S+ \(pid [0-9]+\)$`),
		"agent":    regexp.MustCompile(`^sasdev: agent \S+: program \S+, log \S+$`),
		"ready":    regexp.MustCompile(`^sasdev: ready; a line per order as it settles below\. Logs in \S+\. Ctrl-C stops everything\.$`),
		"settled":  regexp.MustCompile(`^[0-9]{2}:[0-9]{2}:[0-9]{2}  \S+  \S+  \S+  .*$`),
		"compfail": regexp.MustCompile(`Compensated  in `),
	}
	seen := map[string]bool{}
	exported := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(sample), "\n") {
		kind := ""
		for k, re := range kinds {
			if k != "compfail" && re.MatchString(line) {
				kind = k
			}
		}
		require.NotEmpty(t, kind, "the README's make dev sample shows a line the server does not print: %q", line)
		seen[kind] = true
		if m := kinds["export"].FindStringSubmatch(line); m != nil {
			exported[m[1]] = true
		}
		if kind == "settled" {
			require.Equal(t, line, finishLine(orderViewOf(t, line)), "an order's line as finishLine prints it")
			if kinds["compfail"].MatchString(line) {
				seen["compfail"] = true
			}
		}
	}
	for k := range kinds {
		require.True(t, seen[k], "the sample shows no %s line", k)
	}
	for _, v := range append(exportedVars, "SAS_STATUS_QUEUE_URL") {
		require.True(t, exported[v], "the sample exports no %s", v)
	}
}

var settled = regexp.MustCompile(`^([0-9:]{8})  (\S+)  (\S+)  (\S+)  (?:([0-9]+) steps? in (\S+)|in (\S+): (.*))$`)

// orderViewOf is the order a settled line describes.
func orderViewOf(t *testing.T, line string) sas.OrderView {
	m := settled.FindStringSubmatch(line)
	require.NotNil(t, m, "%q", line)
	clock, err := time.ParseInLocation("15:04:05", m[1], time.Local)
	require.NoError(t, err)
	took, err := time.ParseDuration(m[6] + m[7])
	require.NoError(t, err)
	v := sas.OrderView{
		Order:   sas.Order{OrderID: m[2], Workflow: m[3], CreatedAt: clock.Add(-took)},
		History: []sas.HistoryEntry{{At: clock}},
	}
	if m[5] != "" {
		n, _ := strconv.Atoi(m[5])
		for range n {
			v.Steps = append(v.Steps, sas.StepRecord{ProcessState: sas.Processed})
		}
		return v
	}
	for _, part := range strings.Split(m[8], ", ") {
		name, state, _ := strings.Cut(part, " ")
		r := sas.StepRecord{StepName: name, ProcessState: sas.ProcessState(state)}
		if st, reason, ok := strings.Cut(state, " ("); ok {
			r.ProcessState, r.LastError = sas.ProcessState(st), strings.TrimSuffix(reason, ")")
		}
		v.Steps = append(v.Steps, r)
	}
	return v
}
