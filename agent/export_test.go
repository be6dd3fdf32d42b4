package agent

// WithoutClock is r without its clock, for a test that compares requests.
func WithoutClock(r Request) Request { r.clock = nil; return r }
