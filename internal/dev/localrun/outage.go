package localrun

import (
	"sync"
	"time"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// outage is a remote outage scheduled in a demo run (DemoOptions.OutageAt,
// OutageFor): the simulator is down (every call 503) from at to at+dur
// after the burst's submission.
type outage struct {
	mu       sync.Mutex
	origin   time.Time
	from, to time.Duration // since origin; zero until it happened
	up       func()
	timers   []*time.Timer
	ended    bool
}

// scheduleOutage arms an outage of sim; with dur zero it does nothing.
func scheduleOutage(sim *remotesim.Sim, origin time.Time, at, dur time.Duration) *outage {
	o := &outage{origin: origin}
	if dur <= 0 {
		return o
	}
	o.mu.Lock() // the first timer may fire before it is kept
	defer o.mu.Unlock()
	o.timers = append(o.timers, time.AfterFunc(time.Until(origin.Add(at)), func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.ended {
			return
		}
		o.up = sim.Down()
		o.from = max(time.Since(o.origin), time.Nanosecond)
		o.timers = append(o.timers, time.AfterFunc(dur, func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.heal()
		}))
	}))
	return o
}

// heal brings the service up, once. Callers hold mu.
func (o *outage) heal() {
	if o.up != nil {
		o.up()
		o.up = nil
		o.to = max(time.Since(o.origin), time.Nanosecond)
	}
}

// end stops the outage: not started, it never starts; started, the service
// is up again (it is not recorded as healed: the run ended first).
func (o *outage) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	for _, t := range o.timers {
		t.Stop()
	}
	if o.up != nil {
		o.up()
		o.up = nil
	}
}

// mark is the progress line's note while the service is down.
func (o *outage) mark() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.up != nil {
		return " | REMOTE DOWN"
	}
	return ""
}

// window is when the service was down, since origin (zero: it was not; to
// zero: it did not come up before the run ended).
func (o *outage) window() (from, to time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.from, o.to
}
