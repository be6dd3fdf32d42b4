package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// createResources creates the tables and queues and records their names in
// s.env, under the variables the functions read.
func (s *server) createResources(ctx context.Context, base config.Config) error {
	n := s.opts.Name
	s.env = map[string]string{
		"SAS_ORDERS_TABLE": n + "-orders",
		"SAS_STATE_TABLE":  n + "-state",
		"SAS_INDEX_SHARDS": strconv.Itoa(base.IndexShards),
		// The file the functions load; "" for the reference workflows.
		"SAS_WORKFLOWS_FILE": s.opts.Workflows,
		// Every agent has its own queue (SAS_AGENT_QUEUES); there are no
		// priority lanes, alert topic or event bus here.
		"SAS_AGENT_QUEUE_URL": "", "SAS_AGENT_PRIORITY_QUEUE_URL": "",
		"SAS_ALERT_TOPIC_ARN": "", "SAS_EVENT_BUS_NAME": "",
	}
	db := dynamodb.NewFromConfig(s.aws, awsenv.DynamoDBOptions)
	if err := dynamostore.CreateTables(ctx, db, dynamostore.Config{OrdersTable: s.env["SAS_ORDERS_TABLE"], StateTable: s.env["SAS_STATE_TABLE"], Shards: base.IndexShards}); err != nil {
		return err
	}
	create := func(name string, vis time.Duration, dlq bool) (string, error) {
		p := sas.CreateQueueParams{Name: name, Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(vis.Seconds()))}}
		if dlq {
			p.MaxReceiveCount = sizing.MaxReceiveCount
		}
		q, err := s.queue.CreateQueue(ctx, p)
		return q.URL, err
	}
	var err error
	if s.env["SAS_INTAKE_QUEUE_URL"], err = create(n+"-intake", schedulerVisibility, true); err != nil {
		return err
	}
	if s.env["SAS_SCHEDULER_QUEUE_URL"], err = create(n+"-scheduler", schedulerVisibility, true); err != nil {
		return err
	}
	// Retries and compensations: the supervisor and sasctl send here, and
	// the scheduler takes them from nowhere else (docs/trust.md).
	if s.env["SAS_CONTROL_QUEUE_URL"], err = create(n+"-control", schedulerVisibility, true); err != nil {
		return err
	}
	// A key for this run, held by the in-process scheduler alone: never
	// exported, never given to the agents' processes.
	s.env["SAS_SIGNING_KEY"] = base64.StdEncoding.EncodeToString(sas.NewSigningKey())
	if s.statusURL, err = create(n+"-status", schedulerVisibility, false); err != nil {
		return err
	}
	s.env["SAS_ALLOWED_REPLY_QUEUES"] = s.statusURL

	longest := map[string]time.Duration{}
	for _, w := range s.reg {
		for _, st := range w.Steps {
			longest[st.Agent] = max(longest[st.Agent], st.Timeout)
		}
	}
	s.agentQueues = map[string]string{}
	byAgent := map[string]sas.AgentQueue{}
	for _, a := range agentsOf(s.reg) {
		// As long as the agent's function may run (the SDK's runs stop at
		// the step's deadline; its Poll gives 10 s more on shutdown).
		url, err := create(agentQueueName(n, a), sizing.AgentTimeout(longest[a]), true)
		if err != nil {
			return err
		}
		s.agentQueues[a] = url
		byAgent[a] = sas.AgentQueue{URL: url}
	}
	b, err := json.Marshal(byAgent)
	if err != nil {
		return fmt.Errorf("encoding SAS_AGENT_QUEUES: %w", err)
	}
	s.env["SAS_AGENT_QUEUES"] = string(b)
	return nil
}

// agentQueueName is an agent's queue: SQS allows [A-Za-z0-9_-] and 80
// characters, with room for the dead-letter queue's "-dlq".
func agentQueueName(prefix, agent string) string {
	name := prefix + "-agent-" + strings.ReplaceAll(agent, ".", "_")
	if len(name) > 76 {
		name = name[:76]
	}
	return name
}

// startSimulator serves the remote-service simulator on a free loopback
// port, for the built-in HTTP agents to call (SAS_PAYMENTS_URL).
func (s *server) startSimulator() error {
	sim, err := remotesim.New(remotesim.Config{Seed: uint64(time.Now().UnixNano())})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sim.Close()
		return fmt.Errorf("listening for the simulator: %w", err)
	}
	s.sim, s.simURL = sim, "http://"+ln.Addr().String()
	s.simServer = &http.Server{Handler: sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.simServer.Serve(ln) }()
	s.env["SAS_PAYMENTS_URL"] = s.simURL
	return nil
}
