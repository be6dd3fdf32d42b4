// Command echoagent is the agent program of sasdev's test: agent "echo",
// whose step "greet" answers with a greeting, or fails for good when the
// order's payload says {"fail": true}. It is an agent main as a user
// writes one.
package main

import (
	"context"
	"errors"
	"log"

	"github.com/sas-go/sas/agent"
)

func greet(_ context.Context, req agent.Request) (any, error) {
	var p struct {
		Name string `json:"name"`
		Fail bool   `json:"fail"`
	}
	if err := req.DecodePayload(&p); err != nil {
		return nil, agent.Permanent(err)
	}
	if p.Fail {
		return nil, agent.Permanent(errors.New("asked to fail"))
	}
	if p.Name == "" {
		p.Name = "world"
	}
	return map[string]string{"greeting": "hello, " + p.Name}, nil
}

func main() {
	log.Fatal(agent.Start(agent.New("echo").Step("greet", greet, nil)))
}
