// Package scheduler is the Scheduler of the Scheduler Agent Supervisor
// pattern (DESIGN §2, §4): it turns intake messages into orders, claims and
// dispatches their steps to agents, advances an order on each agent reply,
// re-dispatches what the supervisor hands back, and undoes completed steps
// newest first when an order cannot finish. docs/protocol.md is the
// specification; this comment records the decisions it leaves open.
//
// # Every message is handled idempotently
//
// Each path makes one state write (a fenced conditional write, or one
// transaction; a failure that starts compensation adds the claim of the first
// undo) and then has side effects: agent requests, status messages, alerts. A redelivered message (after a crash, or after a send failed and the
// message was reported in batchItemFailures) finds the write already made and
// takes the "duplicate" branch, which repeats the side effects instead:
//
//   - duplicate intake: the order exists; the in-flight step's request is sent
//     again if its lease is still running, and "received" is posted again;
//   - duplicate "done" reply: the successor (claimed in the same transaction)
//     gets its request again if its lease is still running, and "step-done"
//     (and "processed" or "compensated" at the end) is posted again;
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
// An agent.reply names the order, step, attempt and holder, but not the
// workflow, the payload or the caller's replyTo. Every path after intake
// therefore reads the order once (GetOrder: on DynamoDB one GetItem and one
// Query, both consistent); that read also tells a forward reply from an undo
// reply, and a duplicate or stale reply from a live one, before any write.
//
//	intake, new order     0 reads, 1 write (TransactWriteItems: order + steps, step 0 claimed)
//	intake, duplicate     1 read (inside Submit, after its transaction is refused), 0 writes
//	reply done            1 read, 1 write (Complete; with the successor's claim, one transaction)
//	reply failed          1 read, 1 write (Fail), +1 write (Claim) when an undo starts
//	duplicate/stale reply 1 read, 0 writes (a lost race costs the failed write too)
//	retry                 1 read, 1 write (Claim)
//	compensate            1 read, ≤1 write (Claim of the newest undo)
//
// The agent.request carries the order's payload, so agents never read the
// store. Removing the read from the reply path would take a message change
// in package sas: the request carrying, and the reply echoing, the workflow
// name, the replyTo, the payload and whether it is an undo.
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
