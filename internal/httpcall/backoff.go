package httpcall

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoffCeiling is min(maxBackoff, base·2^n), computed without overflow.
func backoffCeiling(base, maxBackoff time.Duration, n int) time.Duration {
	d := base
	for range n {
		if d >= maxBackoff || d > maxBackoff/2 {
			return maxBackoff
		}
		d *= 2
	}
	return min(d, maxBackoff)
}

// fullJitter picks a wait in [0, ceiling) from r in [0, 1). Full jitter
// spreads the retries of many agents hit by the same outage over the whole
// window instead of letting them return together (the "thundering herd").
func fullJitter(ceiling time.Duration, r float64) time.Duration {
	if ceiling <= 0 || !(r > 0) { // !(r > 0) also catches NaN
		return 0
	}
	d := time.Duration(r * float64(ceiling))
	// r close to 1 can round up to the ceiling in float64; a Rand that breaks
	// its [0, 1) contract must not stretch the wait either.
	if d >= ceiling {
		d = ceiling - 1
	}
	return d
}

// retryAfter reads a Retry-After header: delta-seconds or an HTTP-date
// (RFC 9110 §10.2.3). ok is false when it is absent or unreadable, in which
// case the server gave no floor. A date in the past is a floor of zero.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		// Beyond this the Duration would overflow; the deadline check turns
		// any such wait into ErrDeadline anyway.
		const maxSecs = int64(1<<63-1) / int64(time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
