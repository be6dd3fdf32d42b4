// Package agentqueue lets this module's own code (the assembly, the
// simulator, the tests) run an agent.Handler on one of the module's queues
// (the in-memory queue, or the local runs' wrapped SQS adapter), where the
// public agent.HandlerConfig takes an *sqs.Client: the queue port
// (sas.Queue) is internal, and no public signature names it.
package agentqueue

import "github.com/sas-go/sas/internal/sas"

// use is installed by package agent (Register), which owns the field it
// sets: importing agent here would make a cycle.
var use func(cfg any, q sas.Queue)

// Register is called by package agent's init with the function that sets
// an *agent.HandlerConfig's queue.
func Register(f func(cfg any, q sas.Queue)) { use = f }

// Use makes cfg, an *agent.HandlerConfig, send and receive through q
// instead of an SQS client. A nil q unsets it.
func Use(cfg any, q sas.Queue) { use(cfg, q) }
