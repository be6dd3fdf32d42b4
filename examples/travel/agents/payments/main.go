// Command payments is the payments agent's Lambda function (package
// payments), on the demo bank. Build it with `make build` in
// examples/travel.
package main

import (
	"log"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/travel/bank"
	"github.com/sas-go/sas/examples/travel/payments"
)

func main() {
	log.Fatal(agent.Start(payments.Agent(bank.New(payments.DemoLimit))))
}
