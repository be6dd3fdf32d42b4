// Command mail is the mail agent's Lambda function.
package main

import (
	"log"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/greet"
)

func main() { log.Fatal(agent.Start(greet.Mail(greet.NewDemo()))) }
