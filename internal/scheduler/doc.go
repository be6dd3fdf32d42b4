// Package scheduler is the Scheduler of the Scheduler Agent Supervisor
// pattern (docs/pattern.md §2, §4): it turns intake messages into orders, claims and
// dispatches their steps to agents, advances an order on each agent reply,
// re-dispatches what the supervisor hands back, and undoes completed steps
// newest first when an order cannot finish. docs/protocol.md is the
// specification; this comment records the decisions it leaves open.
//
// # Every message is handled idempotently
//
// Each path makes one state write (a fenced conditional write, or one
// transaction; a failure that starts compensation adds the claim of the first
// undo) and then has side effects: agent requests, status messages, alerts.
// A redelivered message (after a crash, or after a send failed and the
// message was reported in batchItemFailures) finds the write already made and
// takes the "duplicate" branch, which repeats the side effects instead:
//
//   - duplicate intake: the order exists; the in-flight step's request is sent
//     again if its lease is still running, and "received" is posted again;
//   - duplicate "done" reply: its write is refused, the order is read, and
//     the successor (claimed in the same transaction as the first delivery's
//     write) gets its request again if its lease is still running, and
//     "step-done" (and "processed" or "compensated" at the end) is posted again;
//   - duplicate "failed" reply (the step is Error at that attempt, written by
//     the same holder): the alert and "failed" are repeated and compensation
//     is started if it has not been;
//   - a retry whose claim is already ours (same instance, same attempt, lease
//     running) re-sends the request.
//
// A lease that has expired is never re-dispatched by the scheduler: the
// supervisor owns it. Anything lost between a write and its message is
// therefore recovered by redelivery, or by the supervisor after the deadline.
// Agents and the remote side are idempotent (stable idempotency keys), and
// replies are fenced on holder and attempt, so a repeated request costs a
// repeated call at most.
//
// Side-effect failures: an agent request or alert that could not be sent fails
// the message (it is redelivered and the duplicate branch resends). A status
// that cannot be sent because the caller's queue is gone or refuses the
// message (sas.ErrNotFound, sas.ErrInvalid, a sender fault) is logged and
// skipped: a caller's broken queue must not hold the order up. Other status
// send failures (throttling, network) fail the message like any send.
//
// Sends are batched per invocation: Handler.Handle holds the messages its
// records make and sends them after the last record, one SendMessageBatch per
// queue for up to ten (SQS bills a batch as one request, so a full batch of
// orders costs 0.1 request per message instead of 1). They go in waves that
// keep each record's messages in order, and a failed message stops its
// record's later ones and fails (or drops) that record alone, as an
// immediate send would have; the record's state write has been made, and its
// redelivery takes the duplicate branch. Service methods called without the
// handler send at once.
//
// # Status sequence numbers
//
// A status carries a per-order sequence number computed from what it reports,
// never from a counter, so a redelivery re-posts the same number and a caller
// can de-duplicate on (orderId, seq). With n steps, step i (0-based),
// attempt a (the fencing attempt of the step, capped at 999):
//
//	rejected                       0
//	received                       1000
//	failed, step i                 (2+2i)·1000 + a
//	step-done, step i              (3+2i)·1000 + a
//	processed                      (2n+2)·1000
//	failed (undo of step i)        (4n+1−2i)·1000 + a
//	compensated                    (4n+3)·1000
//
// The numbers grow in the order the events happen: a step fails before a
// resubmitted attempt of it completes, forward steps before their undos, and
// undos run newest first. The attempt keeps two failures of the same step
// (after an operator resubmits it) apart.
//
// # Reads and writes per message
//
// The agent.request carries the order's workflow, payload and replyTo, and
// the agent echoes them in its reply, with the step name and whether it was
// an undo (sas.AgentReply). A reply is therefore handled without reading the
// order: the fenced write (conditional on state, holder and attempt) is made
// straight away, the successor taken from the workflow registry, and the
// statuses posted to the echoed replyTo. The echo is a routing hint, never a
// fence: a write it leads to that loses hands the reply to the read path,
// which reads the order (GetOrder: on DynamoDB one GetItem and one Query,
// both consistent, about 2 read units) and decides from the records, as
// every reply did before the echo existed, and as a reply without the echo
// (from an older agent) still is. The order is also read where only the
// records can say what comes next: which earlier steps are done when a
// failure starts a compensation, and which undo follows a finished one.
//
//	intake, new order           0 reads, 1 write (TransactWriteItems: order + steps, step 0 claimed)
//	intake, duplicate           1 read (inside Submit, after its transaction is refused), 0 writes
//	reply done                  0 reads, 1 write (Complete: UpdateItem; with the successor's
//	                            claim, one TransactWriteItems)
//	reply failed                0 reads, 1 write (Fail); when an earlier step has an Undo,
//	                            +1 read (after the write) and +1 write (Claim) if an undo starts
//	undo done                   0 reads, 1 write (Complete) when no earlier step has an Undo;
//	                            else 1 read, then 1 write (Complete with the next undo's claim)
//	undo failed                 0 reads, 1 write (Fail)
//	stale reply                 0 reads, 1 refused write (the record the refusal returns shows
//	                            the attempt is gone; attempts only grow)
//	duplicate reply             1 refused write, then 1 read, 0 writes
//	reply without the echo      1 read, then as above (the read classifies before writing)
//	retry                       1 read, 1 write (Claim)
//	compensate                  1 read, ≤1 write (Claim of the newest undo)
//
// So a single-step order's happy path is two store calls and no read: the
// intake transaction and the reply's UpdateItem. A refused conditional write
// still consumes write units; duplicates and stale replies are rare enough
// (at-least-once delivery, rescues) for that to be the better trade.
//
// The successor claimed without a read is taken to be as Submit created it,
// Pending at attempt 0: while a step runs, no step after it has ever been
// claimed (steps run in order, an order never goes back, and an operator
// resubmits only a failed step, whose successors never ran). The claim is
// fenced on that like any claim, so were it ever wrong the transaction is
// refused and the read path claims the successor at the attempt it reads.
//
// What no fence checks on the read-free path is the workflow's shape: the
// next step comes from this deployment's registry, where the read path
// compares it with the step names stored with the order and drops an order
// whose workflow changed. The read-free path only checks the echoed step
// name against the registry's step at that index. Never change a registered
// workflow's steps in place while orders of it run (a step appended or
// removed at the end would go unnoticed): register the new shape under a
// new name.
//
// # Compensation
//
// Undo runs newest first, one supervised step at a time: a step's undo is
// claimed (Compensating, with a deadline and attempt of its own), its done
// reply completes it and claims the next undo in the same transaction, and
// the last one posts "compensated". Which steps are undone:
//
//   - after an agent's permanent failure ("failed" reply): the earlier
//     Processed steps that have an Undo. The failed step itself is not undone:
//     the remote refused it, so there is nothing to take back;
//   - on a "compensate" message (the supervisor gave up on a step, or an
//     operator asked): also an Error step the supervisor gave up on, since it
//     may have taken effect before its agent went quiet (told apart from a
//     refused step by its history: only the attempt's own holder writes a
//     permanent failure), and CompensationFailed steps, which is how an
//     operator retries a failed undo.
//
// A "compensate" message for an order with a forward step still in flight
// (Processing, or Pending and waiting for a pick-up) is refused: the undo
// could race the step it would have to undo.
package scheduler
