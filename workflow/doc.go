// Package workflow defines the workflows a deployment runs: ordered steps,
// each run by a named agent, with what undoes it, its time limits and its
// retry policy. A definition is written in Go or in a JSON file (its JSON
// Schema is schema.json in this directory, also returned by Schema), and is
// checked before anything runs: Validate and Parse refuse a bad definition
// with the file, the path to the field and the reason, so that a deployment
// fails at start-up, never at its first order.
//
// What the fields mean for a running order (the three limits, the failure
// threshold, what an undo owes a remote service) is in docs/protocol.md,
// "Waiting is not executing" and "Idempotency keys".
//
// A file:
//
//	{
//	  "workflows": [
//	    {
//	      "name": "order",
//	      "steps": [
//	        {"name": "reserve", "agent": "inventory", "action": "POST /reservations",
//	         "undo": "POST /reservations/cancel", "timeout": "30s"},
//	        {"name": "charge", "agent": "payments", "action": "POST /payments",
//	         "undo": "POST /refunds", "timeout": "30s", "waitLimit": "10m",
//	         "retry": {"maximumAttempts": 5, "initialInterval": "2s", "maximumInterval": "1m"}},
//	        {"name": "ship", "agent": "shipping", "action": "POST /shipments", "timeout": "1m"}
//	      ]
//	    }
//	  ]
//	}
package workflow
