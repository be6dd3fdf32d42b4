// Command infra is the CDK app for the SAS stack: it reads the configuration
// from CDK context and synthesizes NewStack. Run it through `npx cdk` from
// this directory (see docs/deploy.md), or `make synth` / `make deploy`.
package main

import (
	"log"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// StackID is the stack's construct id and default CloudFormation name; the
// template lands in cdk.out/<StackID>.template.json.
const StackID = "SasStack"

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	props, err := PropsFromContext(app.Node())
	if err != nil {
		log.Fatal(err)
	}
	// Environment-agnostic on purpose: synth needs no credentials, and deploy
	// targets whatever account and region the CLI's credentials name.
	NewStack(app, StackID, props)
	app.Synth(nil)
}
