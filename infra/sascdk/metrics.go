package sascdk

// metrics are the names the actors publish their metrics under
// (internal/metrics in the main module, docs/observability.md), for the
// dashboard and the alarms. A module outside the main one may use only its
// public packages, so they are written again here, under the same
// identifiers; TestMetricNamesMatchTheCode holds them to the code's.
var metrics = struct {
	Namespace, DimWorkflow, DimStep, DimAgent                                        string
	QueueWait, ExecutionTime, AgentDone, AgentFailed, AgentTransient, AgentNoOutcome string
	OrdersSubmitted, OrdersProcessed, StepsDone, StepsFailed, StepsTransient         string
	Retries, CompensationsStarted, CompensationsFinished, OrdersRejected             string
	OldestStuckStepAge, Rescues, Waits, GiveUps, LostRaces, Held                     string
	OwedEffects, OwedOldestAge                                                       string
}{
	Namespace: "SAS", DimWorkflow: "Workflow", DimStep: "Step", DimAgent: "Agent",
	QueueWait: "QueueWait", ExecutionTime: "ExecutionTime",
	AgentDone: "AgentDone", AgentFailed: "AgentFailed", AgentTransient: "AgentTransient", AgentNoOutcome: "AgentNoOutcome",
	OrdersSubmitted: "OrdersSubmitted", OrdersProcessed: "OrdersProcessed",
	StepsDone: "StepsDone", StepsFailed: "StepsFailed", StepsTransient: "StepsTransient",
	Retries: "Retries", CompensationsStarted: "CompensationsStarted", CompensationsFinished: "CompensationsFinished",
	OrdersRejected:     "OrdersRejected",
	OldestStuckStepAge: "OldestStuckStepAgeSeconds", Rescues: "Rescues", Waits: "Waits", GiveUps: "GiveUps",
	LostRaces: "LostRaces", Held: "Held", OwedEffects: "OwedEffects", OwedOldestAge: "OwedOldestAgeSeconds",
}
