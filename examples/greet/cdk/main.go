// Command cdk is the tutorial's CDK app: the SAS construct with the greet
// workflow and its two agents. Run it with the CDK CLI from this directory
// (cdk.json: "go run ."), after building the bootstraps.
package main

import (
	"log"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/examples/greet"
	"github.com/sas-go/sas/infra/sascdk"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Greet"), nil)
	arch := sascdk.ArchARM64
	if v, ok := app.Node().TryGetContext(jsii.String("arch")).(string); ok && v != "" {
		arch = v // x86_64 for MiniStack on an x86 host
	}
	_, err := sascdk.New(stack, "Greet", &sascdk.Props{
		DistDir:   "../dist", // <arch>/scheduler and <arch>/supervisor: built from the sas module (README)
		Arch:      arch,
		Workflows: greet.Workflows(),
		Agents: []sascdk.Agent{ // paths are relative to cdk/, where the CDK CLI runs the app
			{Name: "shop", CodeDir: "../dist/" + goarch(arch) + "/shop", Concurrency: 5},
			{Name: "mail", CodeDir: "../dist/" + goarch(arch) + "/mail", Concurrency: 2},
		},
	})
	if err != nil {
		log.Fatal(err) // one line per problem, e.g. a step naming an agent the deployment lacks
	}
	if err := sascdk.Synth(app); err != nil {
		log.Fatal(err)
	}
}

func goarch(arch string) string {
	if arch == sascdk.ArchX8664 {
		return "amd64"
	}
	return "arm64"
}
