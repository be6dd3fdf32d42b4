// Package e2e is the deploy-and-run test: it deploys the real CDK stack, with
// the real Lambda bootstraps, to MiniStack (a docker-free AWS emulator), and
// drives orders through it end to end, including a rescue by the scheduled
// supervisor; to the same emulator it deploys the travel example
// (examples/travel) and books trips through it. Run it with `make e2e`; see
// README.md in this directory.
//
// Everything else here is behind the "e2e" build tag, so `go test ./...`
// compiles none of it; `make e2e` runs `go test -tags e2e ./e2e`, which fails
// (never skips) when MiniStack cannot be installed or started.
package e2e
