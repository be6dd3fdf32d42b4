package workflow_test

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/workflow"
)

// A workflow written in Go: reserve, charge, ship; the first two undone if
// a later step fails for good.
func ExampleValidate() {
	order := workflow.Workflow{Name: "order", Steps: []workflow.Step{
		{Name: "reserve", Agent: "inventory", Action: "POST /reservations", Undo: "POST /reservations/cancel",
			Timeout: workflow.Duration(30 * time.Second)},
		{Name: "charge", Agent: "payments", Action: "POST /payments", Undo: "POST /refunds",
			Timeout: workflow.Duration(30 * time.Second),
			Retry:   &workflow.Retry{FailureThreshold: 5}},
		{Name: "ship", Agent: "shipping", Action: "POST /shipments"}, // no timeout
	}}
	fmt.Println(workflow.Validate(order))
	// Output: workflows[0].steps[2].timeout: 0s: must be more than 0 and at most 15m0s
}

// A workflow file is refused with the file, the field and the reason.
func ExampleParse() {
	_, err := workflow.Parse("workflows.json", []byte(`{"workflows": [{"name": "payment", "steps": [
		{"name": "charge", "agent": "payments", "action": "POST /payments", "timeout": "30"}
	]}]}`))
	fmt.Println(err)
	// Output: workflows.json: workflows[0].steps[0].timeout: "30" is not a duration (write it like "30s" or "1m30s")
}
