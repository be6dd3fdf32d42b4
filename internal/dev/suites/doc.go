// Package suites holds the suites that run the whole system in one process
// (internal/dev/localrun) and judge it (internal/dev/judge): the integration
// suite, the chaos soak, the overload, outage and priority tests, the cost
// tests and the benchmarks. It has no code of its own.
package suites
