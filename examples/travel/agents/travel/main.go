// Command travel is the travel agent's Lambda function (package booking),
// on the demo suppliers. Build it with `make build` in examples/travel.
package main

import (
	"log"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/travel/booking"
)

func main() {
	log.Fatal(agent.Start(booking.Agent(booking.DemoSuppliers())))
}
