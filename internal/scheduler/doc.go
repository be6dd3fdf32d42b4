// Package scheduler is the Scheduler of the Scheduler Agent Supervisor
// pattern: it turns intake messages into orders, claims and dispatches their
// steps to agents, advances an order on each agent reply, re-sends what the
// supervisor or an agent hands back, and undoes completed steps newest first
// when an order cannot finish.
//
// Every message is handled idempotently: one fenced write (or one
// transaction), then its side effects, which a redelivered message repeats
// when it finds the write already made. The rules live in the docs, not
// here: docs/protocol.md (the messages and what each actor does with them,
// the idempotency keys, the bound on requests per order), docs/pattern.md
// (the pattern and the rules the code relies on), docs/trust.md (which queue
// may carry what), docs/state-store.md (the records and their guards) and
// docs/decisions.md (why).
package scheduler
