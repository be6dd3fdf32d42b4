package sascdk_test

import (
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/infra/sascdk"
	"github.com/sas-go/sas/workflow"
)

// A SAS deployment in a stack of your own app: two agents, one the built-in
// HTTP agent with a priority lane, one with code of your own, and a
// workflow that uses both. testdata/ holds placeholder bootstraps; a real
// app points DistDir at the output of `make build`.
func Example() {
	out, _ := os.MkdirTemp("", "sas-example-")
	defer os.RemoveAll(out)
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)

	payments := sascdk.HTTPAgent("payments", "https://payments.example.com")
	payments.Concurrency, payments.PriorityConcurrency = 10, 2
	sas, err := sascdk.New(stack, "Sas", &sascdk.Props{
		DistDir: "testdata/dist",
		Workflows: []workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
			{Name: "flight", Agent: "flights", Action: "book", Undo: "cancel", Timeout: workflow.Duration(time.Minute)},
			{Name: "pay", Agent: "payments", Action: "POST /payments", Timeout: workflow.Duration(20 * time.Second)},
		}}},
		Agents: []sascdk.Agent{
			payments,
			{Name: "flights", CodeDir: "testdata/flights", Concurrency: 5, Environment: map[string]string{"FLIGHTS_API": "https://api.example.com"}},
		},
	})
	if err != nil {
		fmt.Println(err) // one line per problem
		return
	}
	// Your own resources can use the construct's.
	awscdk.NewCfnOutput(stack, jsii.String("OrdersGoHere"), &awscdk.CfnOutputProps{Value: sas.IntakeQueue().QueueUrl()})

	tmpl := assertions.Template_FromStack(stack, nil) // synthesizes the app
	count := func(typ string) int { return len(*tmpl.FindResources(jsii.String(typ), nil)) }
	fmt.Println("queues:", count("AWS::SQS::Queue"))
	fmt.Println("functions:", count("AWS::Lambda::Function"))
	fmt.Println("event sources:", count("AWS::Lambda::EventSourceMapping"))
	fmt.Println("roles:", count("AWS::IAM::Role"))
	fmt.Println("payments has a lane:", sas.Agent("payments").PriorityQueue != nil)
	fmt.Println("flights has a lane:", sas.Agent("flights").PriorityQueue != nil)

	// The scheduler learns each agent's queues from the deployment section
	// of the workflow file shipped beside its bootstrap, which the
	// environment names.
	scheduler := tmpl.FindResources(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Properties": map[string]any{"Description": assertions.Match_StringLikeRegexp(jsii.String("^SAS scheduler"))},
	})
	for _, fn := range *scheduler {
		env := (*fn)["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		fmt.Println("SAS_WORKFLOWS_FILE:", env["SAS_WORKFLOWS_FILE"])
	}
	// Output:
	// queues: 14
	// functions: 4
	// event sources: 8
	// roles: 4
	// payments has a lane: true
	// flights has a lane: false
	// SAS_WORKFLOWS_FILE: workflows.json
}

// A workflow naming an agent the deployment does not have is refused at
// synth (New returns the same message), with the path to the field.
func ExampleProps_Validate() {
	err := sascdk.Props{
		DistDir: "testdata/dist",
		Workflows: []workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
			{Name: "flight", Agent: "flights", Action: "book", Timeout: workflow.Duration(time.Minute)},
			{Name: "hotel", Agent: "hotels", Action: "book", Timeout: workflow.Duration(time.Minute)},
		}}},
		Agents: []sascdk.Agent{
			{Name: "flights", CodeDir: "testdata/flights", Concurrency: 5},
			{Name: "cars", CodeDir: "testdata/flights", Concurrency: 2},
		},
	}.Validate()
	fmt.Println(err)
	// Output:
	// workflows[0].steps[1].agent: "hotels" is not an agent of this deployment (agents: flights, cars)
}
