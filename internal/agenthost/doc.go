// Package agenthost is the runtime that hosts the Agent of the Scheduler Agent Supervisor pattern
// (docs/pattern.md §2, docs/protocol.md "Agent"): it takes agent.request messages from
// its queue, runs each through the named agent's Runner, and answers the
// scheduler with an agent.reply.
//
// The agent's deadline for a request is its own (Deadline): the step's
// TimeoutMs counted from when it starts the request, so a request that waited
// in the queue past its CompleteBy is run, not dropped; a request without
// TimeoutMs (from an older scheduler) has CompleteBy as its deadline.
//
// Outcomes, per request (docs/protocol.md, "Agent"):
//
//	Run succeeded                      → agent.reply {outcome: done, result if small}
//	Run failed with ErrPermanent       → agent.reply {outcome: failed, reason}
//	no TimeoutMs, CompleteBy passed    → no call, nothing sent, acknowledged
//	  on arrival                          (nothing can serve it)
//	Run failed otherwise (tries        → agent.reply {outcome: transient, reason,
//	  exhausted, deadline reached,        errorType}: the attempt failed, and the
//	  breaker open), the request          scheduler's retry policy decides when
//	  asking for transientOutcome         the step is tried again (failed instead
//	                                      when errorType is one of the request's
//	                                      nonRetryable)
//	no outcome (a request from an      → nothing sent, left for redelivery with a
//	  older scheduler, or the             short visibility backoff: the next run
//	  invocation ending)                  repeats the call under the same key;
//	                                      on its MaxDeliveries-th delivery it is
//	                                      handed back to the scheduler (a
//	                                      retry{requeue}), which sends it again
//	no outcome, *RedeliveryError       → the same, the backoff being its Delay
//	the outcome came after the deadline → nothing sent, left for redelivery the
//	                                      same way (the next run gets the stored
//	                                      answer under the same key)
//	malformed message                  → logged, acknowledged
//
// A request whose reply went out is acknowledged: a first delivery by the
// event source when the invocation returns, a redelivery at once, its
// message deleted as soon as the reply is out, so that a slow request of
// its batch does not hold it (docs/protocol.md, "Dead letters").
//
// The agent's function may poll two queues, its own and its priority lane
// (Config.RequestQueueURL, Config.PriorityQueueURL): a request's visibility
// is changed on the queue it came from.
//
// A reply echoes the request's orderId, step, attempt and lockedBy, which
// fence the scheduler's write: a late or duplicate reply loses cleanly there.
// It also echoes, verbatim and unread, the order fields the request carries
// (workflow, replyTo, payload, compensation, stepName): with them the
// scheduler advances the order without reading it (sas.AgentReply).
//
// The Runners come from the public SDK (package agent), which adapts a
// team's step functions to Runner. How the built-in HTTP agent
// (agent.HTTP, internal/builtinagent) knows what to call: a newer
// scheduler's request carries the step's action ("action": "POST
// /payments", or the undo's for a compensation); for a request without one
// (an older scheduler) the agent's Routes map the step name to the step's
// Action and Undo, taken at start-up from the same workflow registry the
// scheduler runs (RoutesFromRegistry over internal/registry), so a bad
// action fails the cold start, not an order. Routing is by step name alone:
// such a request carries no workflow name either, so a step name must mean
// the same call in every workflow that gives it to the same agent;
// RoutesFromRegistry refuses a registry where it does not.
package agenthost
