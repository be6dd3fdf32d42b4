// Package agent is the SDK for writing the agents of a Scheduler Agent
// Supervisor deployment in Go: a workflow step is a Go function, and the
// SDK hosts it in an AWS Lambda function fed by the agent's SQS queue.
//
//	flights := agent.New("flights").
//		Step("reserve-flight", reserve, cancelReservation).
//		Step("notify", notify, nil)
//
//	func main() {
//		log.Fatal(agent.Start(flights))
//	}
//
// The scheduler sends each step's request to the queue of the step's agent
// and waits for the reply; the SDK decodes the request, finds the step's
// Func by name (its undo for a compensation), runs it, and replies done
// with its result, or failed with a reason. The guide is docs/agents.md;
// the messages are in docs/protocol.md ("Agent").
//
// # Deadline
//
// Each step has a time limit in its workflow definition. The Func's context
// ends when it is up, counted from when the agent started the request
// (Request.Deadline), however long the request waited in the queue. An
// outcome that comes after the deadline is not reported: the request is
// left for redelivery, and its next run, under the same idempotency key,
// gets the service's stored answer.
//
// # What an error means
//
//   - nil: done. The result is reported and recorded with the step (at
//     most 16 KiB of JSON, or the step fails as ResultTooLarge); later
//     steps and the step's own undo read it with Request.DecodeResult.
//   - Permanent(err): failed for good. The reason is err's text; the
//     scheduler compensates the order (runs the undo of each earlier step)
//     and alerts an operator.
//   - Reject(err): a business rejection (a declined card). Compensated as
//     Permanent, but the order ends Rejected and no operator is alerted.
//   - RetryAfter(d, err): not now, in d. Waited out in the process if the
//     deadline allows, else the attempt failed and the next waits at least d.
//   - Named(name, err): err with a name the step's retry policy may list
//     as non-retryable (then failed for good at once).
//   - any other error: transient. Retried in the process with a jittered
//     backoff, within the agent's Tries and the deadline; then the attempt
//     has failed and the agent says so (a "transient" reply): the scheduler
//     counts the failure and runs the step again after its retry policy's
//     interval, or gives it up after its last attempt. A circuit breaker per
//     agent (or per DependsOn dependency) refuses runs while the dependency
//     is down; a refused run is a failed try (see Breaker).
//
// The classes are read with errors.As, so wrapping keeps them. Errors of
// an HTTPClient are already classified: a step can return them as they are.
//
// # Idempotency and at-least-once delivery
//
// SQS delivers a message at least once, and a step's request may be run
// again after a timeout, a crash or a redelivery, even while an earlier run
// is still going. A step must therefore be idempotent under its
// Request.IdempotencyKey: send the key with every effect (the HTTPClient
// sends it as the Idempotency-Key header) and have the service do the
// effect at most once per key, answering a repeated call with the stored
// outcome. The key is the same for every retry, delivery and attempt of a
// step of an order, and differs for its undo ("o-1:1" and "o-1:1:undo").
//
// An undo must commute with its do: the undo of a step may reach the
// service before, or while, a delayed delivery of the step itself. The
// service must let the undo's key cancel the step's, so that the step
// arriving after its undo has no effect (docs/protocol.md, "Idempotency
// keys").
//
// # Hosting
//
// Start runs agents as a Lambda function, configured by the environment:
// SAS_SCHEDULER_QUEUE_URL (required: where replies go), SAS_AGENT_QUEUE_URL
// and SAS_AGENT_PRIORITY_QUEUE_URL (the agent's queue and its priority
// lane, whose requests the function takes; optional, they make a request
// left for redelivery come back sooner). NewHandler builds the same handler
// from explicit configuration, for tests and local runs; Agent.Run runs one
// request through an agent without any queue.
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset) the same main polls its
// queues itself (Handler.Poll): SAS_AGENT_QUEUE_URL is then required, and
// the program runs until SIGINT or SIGTERM, then exits with status 0. That
// is how a local dev server (docs/dev.md) or a container hosts it.
//
// # Calling HTTP services
//
// An HTTPClient (NewHTTPClient) makes a step's calls the way an agent must:
// the same body and Idempotency-Key on every try, retries with jittered
// backoff honouring Retry-After, no try after the deadline, and a circuit
// breaker per endpoint. HTTP builds a whole agent whose steps are each one
// call: the request's Action ("POST /payments") against a base URL. The
// deployment's built-in agent is such an agent.
package agent
