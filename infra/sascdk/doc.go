// Package sascdk is the Scheduler Agent Supervisor system as a CDK for Go
// construct, to put in a stack of your own CDK app:
//
//	sas, err := sascdk.New(stack, "Sas", &sascdk.Props{
//		DistDir:       "dist", // the SAS bootstraps, <GOARCH>/<name>/bootstrap
//		WorkflowsFile: "workflows.json",
//		Agents: []sascdk.Agent{
//			sascdk.HTTPAgent("payments", "https://payments.example.com"),
//			{Name: "flights", CodeDir: "dist/arm64/flights", Concurrency: 5, PriorityConcurrency: 2},
//		},
//	})
//	if err != nil {
//		log.Fatal(err) // one line per problem
//	}
//	sas.IntakeQueue().GrantSendMessages(myApp)
//	if err := sascdk.Synth(app); err != nil { // app.Synth, and the templates checked
//		log.Fatal(err)
//	}
//
// It builds the intake and scheduler queues, the orders and state tables
// (docs/state-store.md), the scheduler, the supervisor on a one-minute
// schedule, an alert topic with alarms, and per agent: a queue with its
// dead-letter queue (and a priority lane with its own when asked), a
// function with its own role and log group, and an event source whose
// MaximumConcurrency bounds the calls the agent's remote service sees.
// Every role names its actions and resources: an agent may consume only its
// own queues and send only to the scheduler queue.
//
// The workflows (package github.com/sas-go/sas/workflow) are checked at
// synth: a bad definition, or a step whose agent is not one of the
// construct's agents, stops the synth with the file, the path to the field
// and the reason. They travel to the functions inside their code asset (see
// workflows.go for why), with the deployment section the scheduler and
// supervisor learn each agent's queues and the limits from (limits.go:
// queue names fixed at synth, nested agent stacks, the 500-resource and 4 KB
// checks).
//
// The SAS bootstraps are built from the sas module with
// `make build` (dist/<GOARCH>/{scheduler,supervisor,agent}/bootstrap);
// infra/main.go in the repository is the app `make deploy` ships, itself
// one use of this construct. docs/deploy.md has the whole story.
package sascdk
