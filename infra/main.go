// Command infra is the CDK app `make deploy` ships: one stack holding the
// SAS construct (package sascdk) configured from CDK context. Run it
// through `npx cdk` from this directory (see docs/deploy.md), or
// `make synth` / `make deploy`. To put SAS in an app of your own, use
// package sascdk directly.
package main

import (
	"log"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/infra/sascdk"
)

// StackID is the stack's construct id and default CloudFormation name; the
// template lands in cdk.out/<StackID>.template.json.
const StackID = "SasStack"

// constructID is the SAS construct's id in the stack. CDK leaves an id of
// "Default" out of logical ids and output names, so the tables, queues and
// outputs keep the names they had when this stack held them directly, and
// updating a stack deployed before the construct replaces none of them
// (only the agent's resources are new: they live under Agent-<name> now).
const constructID = "Default"

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	props, err := PropsFromContext(app.Node())
	if err != nil {
		log.Fatal(err)
	}
	id := StackID
	if v, ok := app.Node().TryGetContext(jsii.String(ctxStackName)).(string); ok && v != "" {
		id = v
	}
	if _, err := NewStack(app, id, props); err != nil {
		log.Fatal(err)
	}
	if err := sascdk.Synth(app); err != nil {
		log.Fatal(err)
	}
}

// NewStack is the deployed stack: environment-agnostic on purpose, so synth
// needs no credentials and deploy targets whatever account and region the
// CLI's credentials name.
func NewStack(scope constructs.Construct, id string, props sascdk.Props) (awscdk.Stack, error) {
	stack := awscdk.NewStack(scope, &id, nil)
	if _, err := sascdk.New(stack, constructID, &props); err != nil {
		return nil, err
	}
	return stack, nil
}
