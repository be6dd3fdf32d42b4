package localrun

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
)

// provision creates what the system runs on, against the emulators (or
// whatever the AWS endpoint variables point at): the tables, the queues and
// their dead-letter queues, a status queue for submitters, a signing key,
// and the remote-service simulator on a free loopback port. It records
// them in s.Config, as a deployment's environment names them to its
// functions.
func (s *System) provision(ctx context.Context) error {
	opts := s.Opts
	var err error
	if s.AWS, err = awsenv.Load(ctx); err != nil {
		return err
	}
	if opts.Counter != nil {
		opts.Counter.Attach(&s.AWS)
	}
	db := dynamodb.NewFromConfig(s.AWS, awsenv.DynamoDBOptions)
	s.Queue = sqsqueue.New(sqs.NewFromConfig(s.AWS))

	cfg := config.Config{
		OrdersTable: opts.Name + "-orders", StateTable: opts.Name + "-state", IndexShards: opts.Shards,
		MaxFailures: opts.MaxFailures, StepTimeout: opts.StepTimeout, PickupTimeout: opts.PickupTimeout,
		WaitLimit: opts.WaitLimit,
	}
	dcfg := dynamostore.Config{OrdersTable: cfg.OrdersTable, StateTable: cfg.StateTable, Shards: cfg.IndexShards}
	if err := dynamostore.CreateTables(ctx, db, dcfg); err != nil {
		return err
	}
	if s.Store, err = dynamostore.New(db, dcfg); err != nil {
		return err
	}
	s.observer, s.observerStore = s.Queue, s.Store
	if opts.Counter != nil {
		plain, err := awsenv.Load(ctx)
		if err != nil {
			return fmt.Errorf("loading the harness's uncounted AWS config: %w", err)
		}
		s.observer = sqsqueue.New(sqs.NewFromConfig(plain))
		if s.observerStore, err = dynamostore.New(dynamodb.NewFromConfig(plain, awsenv.DynamoDBOptions), dcfg); err != nil {
			return fmt.Errorf("building the harness's store: %w", err)
		}
	}
	// Every version is stored before its first order (the scheduler's
	// storeDefinition), so the store alone serves the views' definitions,
	// whatever Deploy registers later: one read per version, cached.
	s.definitions = sas.NewDefinitions(nil, s.observerStore)
	// Every work queue has the same short visibility (Options.Visibility),
	// so that what a killed instance held comes back in seconds.
	vis := fmt.Sprint(int(opts.Visibility.Seconds()))
	for _, q := range []struct {
		name string
		url  *string
	}{{"intake", &cfg.IntakeQueueURL}, {"scheduler", &cfg.SchedulerQueueURL}, {"control", &cfg.ControlQueueURL}, {"agent", &cfg.AgentQueueURL}} {
		created, err := s.Queue.CreateQueue(ctx, sas.CreateQueueParams{
			Name: opts.Name + "-" + q.name, Attributes: map[string]string{"VisibilityTimeout": vis}, MaxReceiveCount: opts.MaxReceiveCount,
		})
		if err != nil {
			return err
		}
		*q.url = created.URL
		s.DLQs[q.name] = created.DLQURL
	}
	cfg.AgentQueues = sas.AgentQueues{Default: cfg.AgentQueueURL}
	// One key per run, shared by the run's schedulers (docs/trust.md).
	cfg.SigningKey = base64.StdEncoding.EncodeToString(sas.NewSigningKey())
	if opts.PriorityWorkers > 0 {
		lane, err := s.Queue.CreateQueue(ctx, sas.CreateQueueParams{
			Name: opts.Name + "-agent-priority", Attributes: map[string]string{"VisibilityTimeout": vis}, MaxReceiveCount: opts.MaxReceiveCount,
		})
		if err != nil {
			return err
		}
		cfg.AgentPriorityQueueURL = lane.URL
		s.DLQs["agent-priority"] = lane.DLQURL
		cfg.AgentQueues.ByAgent = map[string]sas.AgentQueue{
			registry.PaymentsAgent: {URL: cfg.AgentQueueURL, PriorityURL: lane.URL},
		}
	}
	status, err := s.Queue.CreateQueue(ctx, sas.CreateQueueParams{Name: opts.Name + "-status"})
	if err != nil {
		return err
	}
	s.StatusQueueURL = status.URL
	cfg.AllowedReplyQueues = []string{status.URL}

	if s.Sim, err = remotesim.New(remotesim.Config{Seed: opts.Seed, Faults: opts.Faults}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for the simulator: %w", err)
	}
	s.SimURL = "http://" + ln.Addr().String()
	cfg.PaymentsURL = s.SimURL
	s.simServer = &http.Server{Handler: s.Sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.simServer.Serve(ln) }()
	s.Config = cfg
	return nil
}
