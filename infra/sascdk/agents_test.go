package sascdk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/workflow"
)

// twoAgentProps: a built-in HTTP agent with a priority lane and an agent
// of the user's own from a directory, workflows given in Go.
func twoAgentProps(dist string) Props {
	return Props{
		DistDir: dist,
		Workflows: []workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
			{Name: "flight", Agent: "flights", Action: "POST /bookings", Undo: "POST /bookings/cancel", Timeout: workflow.Duration(45 * time.Second)},
			{Name: "car", Agent: "cars", Action: "rent", Timeout: workflow.Duration(20 * time.Second)},
		}}},
		Agents: []Agent{
			func() Agent {
				a := HTTPAgent("flights", "https://flights.example.test")
				a.Concurrency, a.PriorityConcurrency = 6, 3
				a.Auth = &AgentAuth{SecretARN: authParameterARN}
				return a
			}(),
			{Name: "cars", CodeDir: filepath.Join(dist, "arm64", "cars"), Concurrency: 4, Environment: map[string]string{"CARS_REGION": "eu"}},
		},
	}
}

// fiveWorkflows is the five-agent stack's workflow file.
const fiveWorkflows = `{
  "workflows": [
    {"name": "trip", "steps": [
      {"name": "flight", "agent": "airline", "action": "POST /bookings", "undo": "POST /bookings/cancel", "timeout": "30s"},
      {"name": "hotel", "agent": "hotels", "action": "POST /reservations", "undo": "POST /reservations/cancel", "timeout": "1m", "waitLimit": "5m"},
      {"name": "car", "agent": "cars", "action": "rent", "undo": "return", "timeout": "10s"},
      {"name": "train", "agent": "trains", "action": "book", "timeout": "10s"},
      {"name": "pay", "agent": "payments", "action": "POST /payments", "timeout": "20s", "totalLimit": "30m",
       "retry": {"failureThreshold": 5, "backoff": {"base": "2s", "max": "1m"}}}
    ]},
    {"name": "payment", "steps": [
      {"name": "pay", "agent": "payments", "action": "POST /payments", "timeout": "20s", "totalLimit": "30m",
       "retry": {"failureThreshold": 5, "backoff": {"base": "2s", "max": "1m"}}}
    ]}
  ]
}
`

// fiveAgentProps: five agents from a workflow file, code given every way.
func fiveAgentProps(dist string) Props {
	file := filepath.Join(scratch("sas-workflows-"), "workflows.json")
	if err := os.WriteFile(file, []byte(fiveWorkflows), 0o644); err != nil {
		panic(err)
	}
	airline := HTTPAgent("airline", "https://airline.example.test")
	airline.Concurrency, airline.PriorityConcurrency = 5, 2
	payments := HTTPAgent("payments", "https://payments.example.test")
	payments.Concurrency, payments.Timeout, payments.MemorySize = 50, 2*time.Minute, 512
	return Props{
		DistDir:       dist,
		WorkflowsFile: file,
		Agents: []Agent{
			airline,
			HTTPAgent("hotels", "https://hotels.example.test"),
			payments,
			{Name: "cars", Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(dist, "arm64", "cars")), nil), Concurrency: 3, PriorityConcurrency: 2},
			{Name: "trains", CodeDir: filepath.Join(dist, "arm64", "trains"), Concurrency: 2},
		},
	}
}

// agentIDs are the construct ids of one agent's resources, as ref names them.
type agentIDs struct {
	queue, dlq, lane, laneDLQ, function, role, logs, replies string
}

func idsOf(name string) agentIDs {
	p := "Agent" + strings.NewReplacer("-", "", ".", "", "_", "").Replace(name)
	return agentIDs{p + "Queue", p + "QueueDLQ", p + "PriorityQueue", p + "PriorityQueueDLQ", p + "Function", p + "Role", p + "Logs", p + "Replies"}
}

func TestAgentsShape(t *testing.T) {
	f := all(t)
	for name, s := range map[string]*synthesized{"one": f.def, "two": f.two, "five": f.five} {
		agents, lanes := len(s.props.Agents), 0
		for _, a := range s.props.Agents {
			if a.PriorityConcurrency > 0 {
				lanes++
			}
		}
		for typ, n := range map[string]int{
			"AWS::SQS::Queue":                 6 + 3*agents + 2*lanes, // intake, scheduler, control, their DLQs; per agent a queue and DLQ and a reply queue; per lane a queue and DLQ
			"AWS::SQS::QueuePolicy":           6 + 3*agents + 2*lanes,
			"AWS::Lambda::Function":           2 + agents,
			"AWS::Lambda::EventSourceMapping": 3 + 2*agents + lanes, // per agent its queue → it, its reply queue → the scheduler
			"AWS::IAM::Role":                  2 + agents,
			"AWS::Logs::LogGroup":             2 + agents,
			"AWS::CloudWatch::Alarm":          3 + 2 + 4 + 2*agents + lanes, // DLQs, errors, stuck step, give-up rate, owed too long and not running; per agent DLQ and errors; per lane DLQ
		} {
			if got := len(s.resources(typ)); got != n {
				t.Errorf("%s: %d %s, want %d", name, got, typ, n)
			}
		}

		functions := s.resources("AWS::Lambda::Function")
		queues := s.resources("AWS::SQS::Queue")
		mappings := map[string]map[string]any{} // "queue→function" → properties
		for _, r := range s.resources("AWS::Lambda::EventSourceMapping") {
			p := props(r)
			mappings[ref(p["EventSourceArn"])+"→"+ref(p["FunctionName"])] = p
		}
		for _, a := range s.props.Agents {
			ids := idsOf(a.Name)
			fn := props(functions[ids.function])
			if fn == nil {
				t.Errorf("%s: agent %s has no function %s", name, a.Name, ids.function)
				continue
			}
			timeout := fn["Timeout"].(float64)
			check := func(queue, dlq string, concurrency int, consumer string) {
				q := props(queues[queue])
				if q == nil {
					t.Errorf("%s: agent %s has no queue %s", name, a.Name, queue)
					return
				}
				rp, _ := q["RedrivePolicy"].(map[string]any)
				if got := ref(rp["deadLetterTargetArn"]); got != dlq {
					t.Errorf("%s: %s redrives to %q, want %q", name, queue, got, dlq)
				}
				if vis, _ := q["VisibilityTimeout"].(float64); consumer == ids.function && vis < 6*timeout {
					t.Errorf("%s: %s visibility %vs < 6 × its function's timeout %vs", name, queue, vis, timeout)
				}
				m := mappings[queue+"→"+consumer]
				if m == nil {
					t.Errorf("%s: no event source %s → %s", name, queue, consumer)
					return
				}
				sc, _ := m["ScalingConfig"].(map[string]any)
				if got := sc["MaximumConcurrency"]; got != float64(concurrency) {
					t.Errorf("%s: %s → %s MaximumConcurrency %v, want %d", name, queue, consumer, got, concurrency)
				}
				if got := strs(m["FunctionResponseTypes"]); !reflect.DeepEqual(got, []string{"ReportBatchItemFailures"}) {
					t.Errorf("%s: %s → %s FunctionResponseTypes %v", name, queue, consumer, got)
				}
			}
			check(ids.queue, ids.dlq, a.Concurrency, ids.function)
			// Its replies: a queue of its own, read by the scheduler with a
			// share of two, dead letters to the scheduler queue's DLQ
			// (docs/trust.md, "A reply queue per agent").
			check(ids.replies, "SchedulerQueueDLQ", 2, "Scheduler")
			if a.PriorityConcurrency > 0 {
				check(ids.lane, ids.laneDLQ, a.PriorityConcurrency, ids.function)
			} else if _, ok := queues[ids.lane]; ok {
				t.Errorf("%s: agent %s has a lane it did not ask for", name, a.Name)
			}
		}
	}
}

// TestAgentFunctions checks each agent's timeout, memory and environment.
func TestAgentFunctions(t *testing.T) {
	f := all(t)
	type want struct {
		timeout, memory float64
		env             map[string]string
	}
	builtin := func(name, url, lane string, workflows bool) map[string]string {
		env := map[string]string{
			"SAS_AGENT_NAME":          name,
			"SAS_SCHEDULER_QUEUE_URL": idsOf(name).replies, // its own reply queue
			"SAS_AGENT_QUEUE_URL":     idsOf(name).queue,
		}
		if url != "" {
			env["SAS_AGENT_BASE_URL"], env["SAS_PAYMENTS_URL"] = url, url
		}
		if lane != "" {
			env["SAS_AGENT_PRIORITY_QUEUE_URL"] = lane
		}
		if workflows {
			env["SAS_WORKFLOWS_FILE"] = "workflows.json"
		}
		return env
	}
	own := func(name string, lane bool, extra map[string]string) map[string]string {
		env := builtin(name, "", "", false)
		if lane {
			env["SAS_AGENT_PRIORITY_QUEUE_URL"] = idsOf(name).lane
		}
		return merge(env, extra)
	}
	for _, tc := range []struct {
		s      *synthesized
		agents map[string]want
	}{
		// The reference workflows: every step 30 s, plus 15 s.
		// Built-in agents always get the file: its deployment section.
		{f.def, map[string]want{"payments": {45, 256, builtin("payments", "", "", true)}}},
		{f.variant, map[string]want{"payments": {45, 256, merge(builtin("payments", "https://payments.example.test", "", true),
			map[string]string{"SAS_AGENT_AUTH_SECRET": authSecretARN, "SAS_AGENT_AUTH_HEADER": "X-Api-Key"})}}},
		{f.two, map[string]want{
			"flights": {60, 256, merge(builtin("flights", "https://flights.example.test", "AgentflightsPriorityQueue", true),
				map[string]string{"SAS_AGENT_AUTH_SECRET": authParameterARN})},
			"cars": {35, 256, own("cars", false, map[string]string{"CARS_REGION": "eu"})},
		}},
		{f.five, map[string]want{
			"airline":  {45, 256, builtin("airline", "https://airline.example.test", "AgentairlinePriorityQueue", true)},
			"hotels":   {75, 256, builtin("hotels", "https://hotels.example.test", "", true)},
			"payments": {120, 512, builtin("payments", "https://payments.example.test", "", true)},
			"cars":     {25, 256, own("cars", true, nil)},
			"trains":   {25, 256, own("trains", false, nil)},
		}},
	} {
		for name, w := range tc.agents {
			fn := idsOf(name).function
			p := props(tc.s.resource(t, "AWS::Lambda::Function", fn))
			if p["Timeout"] != w.timeout || p["MemorySize"] != w.memory {
				t.Errorf("%s %s: timeout %v memory %v, want %v and %v", *tc.s.stack.StackName(), fn, p["Timeout"], p["MemorySize"], w.timeout, w.memory)
			}
			if got := tc.s.env(t, fn); !reflect.DeepEqual(got, w.env) {
				t.Errorf("%s %s environment:\n got %v\nwant %v", *tc.s.stack.StackName(), fn, got, w.env)
			}
		}
	}
}

// TestAgentQueuesReachSchedulerAndSupervisor reads the deployment section
// of the file shipped with the scheduler and the supervisor: every agent's
// queue and lane by the name the template gives the queue, and nothing of
// them in the environment (Lambda's 4 KB).
func TestAgentQueuesReachSchedulerAndSupervisor(t *testing.T) {
	f := all(t)
	for name, s := range map[string]*synthesized{"one": f.def, "two": f.two, "five": f.five} {
		queueNames := map[string]string{} // construct id → QueueName
		for id, r := range s.resources("AWS::SQS::Queue") {
			if n, ok := props(r)["QueueName"].(string); ok {
				queueNames[id] = n
			}
		}
		want := map[string]workflow.AgentQueues{}
		urls := map[string]agentQueue{}
		for _, a := range s.props.Agents {
			q := workflow.AgentQueues{Queue: queueNames[idsOf(a.Name).queue], Replies: queueNames[idsOf(a.Name).replies]}
			u := agentQueue{URL: idsOf(a.Name).queue}
			if a.PriorityConcurrency > 0 {
				q.PriorityQueue = queueNames[idsOf(a.Name).lane]
				u.PriorityURL = idsOf(a.Name).lane
			}
			if q.Queue == "" || q.Replies == "" || (a.PriorityConcurrency > 0) != (q.PriorityQueue != "") {
				t.Errorf("%s: agent %s's queues are not named: %v", name, a.Name, queueNames)
			}
			want[a.Name] = q
			urls[a.Name] = u
		}
		for _, fn := range []string{"Scheduler", "Supervisor"} {
			env := s.env(t, fn)
			file, err := workflow.LoadFile(filepath.Join(s.assetDir(t, props(s.resource(t, "AWS::Lambda::Function", fn))), env["SAS_WORKFLOWS_FILE"]))
			if err != nil {
				t.Errorf("%s %s: %v", name, fn, err)
				continue
			}
			if !reflect.DeepEqual(file.Deployment.Agents, want) {
				t.Errorf("%s %s: the file's agents %v, want %v", name, fn, file.Deployment.Agents, want)
			}
			for _, v := range []string{"SAS_AGENT_QUEUES", "SAS_AGENT_QUEUE_URL", "SAS_STEP_TIMEOUT", "SAS_MAX_FAILURES", "SAS_PICKUP_TIMEOUT"} {
				if _, ok := env[v]; ok {
					t.Errorf("%s %s: %s set beside the file", name, fn, v)
				}
			}
		}
		// The queues' URLs are an output, for clients and operators.
		out := ref(s.doc["Outputs"].(map[string]any)["AgentQueues"].(map[string]any)["Value"])
		var got map[string]agentQueue
		if err := json.Unmarshal([]byte(out), &got); err != nil || !reflect.DeepEqual(got, urls) {
			t.Errorf("%s: output AgentQueues %q (%v), want %v", name, out, err, urls)
		}
	}
}

// TestPerAgentLeastPrivilege: each agent consumes its own queues only,
// sends to the scheduler queue only and writes its own logs; the scheduler
// sends to every agent queue and lane; the supervisor reads the depth of
// every one of them.
func TestPerAgentLeastPrivilege(t *testing.T) {
	f := all(t)
	for name, s := range map[string]*synthesized{"one": f.def, "two": f.two, "five": f.five} {
		queues := []string{"SchedulerQueue"}
		for _, a := range s.props.Agents {
			ids := idsOf(a.Name)
			own := []string{ids.queue}
			if a.PriorityConcurrency > 0 {
				own = append(own, ids.lane)
			}
			sort.Strings(own)
			queues = append(queues, append(own, ids.replies)...)
			want := map[string][]string{
				"logs:CreateLogStream":        {ids.logs},
				"logs:PutLogEvents":           {ids.logs},
				"sqs:ReceiveMessage":          own,
				"sqs:DeleteMessage":           own,
				"sqs:GetQueueAttributes":      own,
				"sqs:ChangeMessageVisibility": own,
				"sqs:SendMessage":             {ids.replies}, // its own reply queue, no other
			}
			if a.Auth != nil { // TestAgentAuthSecretReadableByThatAgentAlone
				want["ssm:GetParameter"] = []string{a.Auth.SecretARN}
			}
			if got := s.grants(t, ids.role); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: agent %s grants:\n got %v\nwant %v", name, a.Name, got, want)
			}
		}
		sort.Strings(queues)
		// And the queues it reads, for renewed copies (internal/scheduler/renew.go).
		sends := append([]string{"ControlQueue", "IntakeQueue"}, queues...)
		sort.Strings(sends)
		if got := s.grants(t, "SchedulerRole")["sqs:SendMessage"]; !reflect.DeepEqual(got, sends) {
			t.Errorf("%s: scheduler sqs:SendMessage on %v, want %v", name, got, sends)
		}
		if got := s.grants(t, "SupervisorRole")["sqs:GetQueueAttributes"]; !reflect.DeepEqual(got, queues) {
			t.Errorf("%s: supervisor sqs:GetQueueAttributes on %v, want %v", name, got, queues)
		}
		for _, st := range s.statements() {
			checkStatement(t, name+" "+st.where, st.doc)
		}
	}
}

// TestWorkflowsShipWithTheFunctions reads the workflow file out of each
// function's asset: the scheduler, the supervisor and the built-in agents
// carry it beside their bootstrap; agents with code of their own do not.
func TestWorkflowsShipWithTheFunctions(t *testing.T) {
	f := all(t)
	for name, s := range map[string]*synthesized{"two": f.two, "five": f.five} {
		want, err := s.props.loadWorkflows()
		if err != nil {
			t.Fatal(err)
		}
		carriers := map[string]string{"Scheduler": "scheduler", "Supervisor": "supervisor"}
		for _, a := range s.props.Agents {
			if a.builtin {
				carriers[idsOf(a.Name).function] = "agent"
			}
		}
		for id, r := range s.resources("AWS::Lambda::Function") {
			dir := s.assetDir(t, props(r))
			body, err := os.ReadFile(filepath.Join(dir, "workflows.json"))
			bin, ok := carriers[id]
			if !ok {
				if err == nil {
					t.Errorf("%s %s: ships a workflow file it was not given", name, id)
				}
				if _, set := s.env(t, id)["SAS_WORKFLOWS_FILE"]; set {
					t.Errorf("%s %s: SAS_WORKFLOWS_FILE set for code of the user's own", name, id)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: no workflows.json in its asset: %v", name, id, err)
				continue
			}
			got, err := workflow.ParseFile("workflows.json", body)
			if err != nil || !reflect.DeepEqual(got.Workflows, want) || got.Deployment == nil {
				t.Errorf("%s %s: workflows.json parses to %+v (%v), want %+v and a deployment", name, id, got, err, want)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "bootstrap")); string(b) != distFakeMarker+"arm64/"+bin+"\n" {
				t.Errorf("%s %s: ships %q beside the workflows, want the %s bootstrap", name, id, b, bin)
			}
			if got := s.env(t, id)["SAS_WORKFLOWS_FILE"]; got != "workflows.json" {
				t.Errorf("%s %s: SAS_WORKFLOWS_FILE %q", name, id, got)
			}
		}
	}
	// Without workflows the file holds the deployment alone: the
	// reference workflows are in the binaries.
	for _, id := range []string{"Scheduler", "Supervisor", "AgentpaymentsFunction"} {
		file, err := workflow.LoadFile(filepath.Join(f.def.assetDir(t, props(f.def.resource(t, "AWS::Lambda::Function", id))), "workflows.json"))
		if err != nil || file.Workflows != nil || file.Deployment == nil {
			t.Errorf("default %s: the file %+v (%v), want a deployment section alone", id, file, err)
		}
		if got := f.def.env(t, id)["SAS_WORKFLOWS_FILE"]; got != "workflows.json" {
			t.Errorf("default %s: SAS_WORKFLOWS_FILE %q", id, got)
		}
	}
}

// env is a function's environment, values named by ref.
func (s *synthesized) env(t *testing.T, fn string) map[string]string {
	t.Helper()
	vars := props(s.resource(t, "AWS::Lambda::Function", fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
	out := map[string]string{}
	for k, v := range vars {
		out[k] = ref(v)
	}
	return out
}

// assetDir is where the cloud assembly staged a function's code: the zip's
// S3 key is the asset hash, the staged copy asset.<hash>/.
func (s *synthesized) assetDir(t *testing.T, fn map[string]any) string {
	t.Helper()
	key := ref(fn["Code"].(map[string]any)["S3Key"])
	return filepath.Join(s.outdir, "asset."+strings.TrimSuffix(key, ".zip"))
}

// TestStagingInAnImplicitApp: a stack built with no scope (as some unit
// tests do) gets an App from CDK; the workflows are staged in its assembly
// directory like any asset.
func TestStagingInAnImplicitApp(t *testing.T) {
	all(t) // the shared runtime and fixtureDist
	stack := awscdk.NewStack(nil, jsii.String("Lone"), nil)
	outdir := *awscdk.Stage_Of(stack).Outdir()
	defer os.RemoveAll(outdir)
	p := twoAgentProps(fixtureDist)
	sas, err := New(stack, "Sas", &p)
	if err != nil {
		t.Fatal(err)
	}
	if sas.Agent("flights") == nil || sas.Agent("cars") == nil || sas.Agent("hotels") != nil {
		t.Errorf("agents %v", sas.Agents())
	}
	// The scheduler, the supervisor and the built-in agent, each staged once.
	if staged, _ := filepath.Glob(filepath.Join(outdir, "sas-staging", "*", "workflows.json")); len(staged) != 3 {
		t.Errorf("staged %v, want three", staged)
	}
}
