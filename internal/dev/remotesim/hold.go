package remotesim

import (
	"net/http"
	"sync"
)

// hold is one Hold: the calls it matches wait until released is closed.
type hold struct {
	match    func(orderID string) bool
	released chan struct{}
}

// Hold makes the calls for the orders match accepts wait, before anything
// is decided or recorded for them, until release is called (or the client
// goes, or Close). A test uses it to keep a backlog in place while it
// checks what overtakes it, instead of racing a latency against its own
// progress. Calling release twice is safe.
func (s *Sim) Hold(match func(orderID string) bool) (release func()) {
	h := &hold{match: match, released: make(chan struct{})}
	s.mu.Lock()
	s.holds = append(s.holds, h)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			for i, x := range s.holds {
				if x == h {
					s.holds = append(s.holds[:i], s.holds[i+1:]...)
					break
				}
			}
			s.mu.Unlock()
			close(h.released)
		})
	}
}

// Held is how many calls wait in a Hold right now.
func (s *Sim) Held() int { return int(s.held.Load()) }

// waitHeld waits while a Hold matches orderID; false when the client went
// or the simulator closed meanwhile.
func (s *Sim) waitHeld(r *http.Request, orderID string) bool {
	for {
		var h *hold
		s.mu.Lock()
		for _, x := range s.holds {
			if x.match(orderID) {
				h = x
				break
			}
		}
		s.mu.Unlock()
		if h == nil {
			return true
		}
		s.held.Add(1)
		select {
		case <-h.released:
			s.held.Add(-1)
		case <-r.Context().Done():
			s.held.Add(-1)
			return false
		case <-s.closed:
			s.held.Add(-1)
			return false
		}
	}
}
