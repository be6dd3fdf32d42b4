// Package localrun hosts the three Lambda handlers in one process against
// the emulators, the way AWS would run them (internal/dev/poller), with the
// harness's faults (chaos.go) and what it observes for the judge
// (internal/dev/judge): `make run`'s demo and the integration, cost and
// benchmark suites run on it.
package localrun
