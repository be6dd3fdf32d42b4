package sim

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// A task is one invocation of a real handler (a scheduler or agent batch, a
// supervisor sweep, an operator's command) run on a goroutine of its own,
// but never at the same time as anything else: it stops at every call it
// makes to the outside (the store, a queue, the alerter, the remote service,
// a sleep) and waits there until the simulator resumes it. The simulator
// resumes one task at a time, so the whole run is one thread of control and
// a seed fixes every interleaving (docs/simulation.md).
type task struct {
	id   int
	name string
	// ev receives the task's next stop (its op), or nil when it ended.
	ev     chan *op
	resume chan choice
	at     *op // where it stands; nil before it started
	dead   atomic.Bool
	ended  bool
	// panicked holds a panic that escaped the handler: a bug.
	panicked string

	// What the task's writes obliged it to send (see obligation), and
	// whether a fault excuses it (a send or an alert the simulator failed).
	owes    []obligation
	excused bool
	// handOffFailed: a send that would have handed a received message on
	// (handOff) failed.
	handOffFailed bool
	// received are the messages a delivery handed the task.
	received []received
	// stops counts the task's stops, and diedAt is the one it died at.
	stops, diedAt int
	// after runs when the task ended without crashing (the event source
	// deleting what the handler acknowledged, say).
	after func()
	// deadline is when the function running the task times out (zero: it
	// never does, an operator's command). Lambda stops an invocation at
	// its timeout, so a task resumed past it dies there instead.
	deadline time.Time
}

// received is a message a task received, and that receive.
type received struct {
	m *message
	r *receive
}

// opKind sorts the calls a task stops at, for the faults each may get.
type opKind int

const (
	opRead opKind = iota
	opWrite
	opSend
	opAlert
	opRemote
	opOther
)

// op is one stop of a task: what it is about to do.
type op struct {
	kind opKind
	desc string
}

// choice is what the simulator decides at a stop.
type choice struct {
	crash bool // the instance dies here: the call is never made
	// fault is the fault the call gets: for a write, an ambiguous commit;
	// for a send or an alert, a failure; for a remote call, one of the
	// remote faults.
	fault fault
}

type fault int

const (
	faultNone        fault = iota
	faultAmbiguous         // a write that committed, its response lost, retried
	faultFail              // a send or an alert that fails
	faultTransient         // the remote: a transient error, no effect
	faultPermanent         // the remote: a refusal
	faultLost              // the remote: the effect is made, the answer lost
	faultUnavailable       // the store: the call fails, having done nothing
)

type taskKey struct{}

func taskOf(ctx context.Context) *task {
	t, _ := ctx.Value(taskKey{}).(*task)
	return t
}

// stop is where a task waits for the simulator. Calls from outside any
// task (the simulator's own reads) pass straight through.
func stop(ctx context.Context, kind opKind, format string, args ...any) choice {
	t := taskOf(ctx)
	if t == nil {
		return choice{}
	}
	if t.dead.Load() {
		runtime.Goexit()
	}
	t.stops++
	t.ev <- &op{kind: kind, desc: fmt.Sprintf(format, args...)}
	c := <-t.resume
	if c.crash {
		t.diedAt = t.stops
		t.dead.Store(true)
		runtime.Goexit()
	}
	return c
}

// stuck bounds how long the simulator waits, in real time, for a resumed
// task to reach its next stop: a task that never does is a bug of the
// simulator or a handler blocking on something outside it.
const stuck = 30 * time.Second

// start runs fn as a task, on a function that times out after timeout (0:
// never), and waits for its first stop.
func (w *World) start(name string, timeout time.Duration, fn func(ctx context.Context)) *task {
	w.nextTask++
	t := &task{id: w.nextTask, name: name, ev: make(chan *op), resume: make(chan choice)}
	if timeout > 0 {
		t.deadline = w.clock.Now().Add(timeout)
	}
	ctx := context.WithValue(context.Background(), taskKey{}, t)
	go func() {
		defer func() { t.ev <- nil }()
		defer func() {
			if p := recover(); p != nil {
				t.panicked = fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}()
		fn(ctx)
		// A last stop, so that an instance can die after its last effect
		// and before the event source deletes what it acknowledged.
		stop(ctx, opOther, "return")
	}()
	w.tasks = append(w.tasks, t)
	w.wait(t)
	return t
}

// step resumes t with c and waits for its next stop or its end. A task
// past its function's timeout dies instead of making its call: an
// invocation never outlives its timeout, and the queues' visibility is six
// times that (internal/sizing), so no handler acts on a message after its
// receipt went stale by waiting.
func (w *World) step(t *task, c choice) {
	if !c.crash && !t.deadline.IsZero() && w.clock.Now().After(t.deadline) {
		w.tracef("task %d (%s) timed out before %s", t.id, t.name, t.at.desc)
		c = choice{crash: true}
	}
	t.resume <- c
	w.wait(t)
}

func (w *World) wait(t *task) {
	select {
	case o := <-t.ev:
		if o != nil {
			t.at = o
			return
		}
	case <-time.After(stuck):
		panic(fmt.Sprintf("sim: task %d (%s) did not reach its next stop in %s after %v", t.id, t.name, stuck, t.at))
	}
	t.ended, t.at = true, nil
	w.ended(t)
}

// kill ends a task that is stopped, as a dying instance would.
func (w *World) kill(t *task) {
	if !t.ended {
		w.step(t, choice{crash: true})
	}
}
