//go:build e2e && linux

package e2e

import "syscall"

// childSysProcAttr puts a child in its own process group (so that stopping
// it stops what it spawned, and a Ctrl-C meant for the test does not reach it
// first) and has the kernel kill it if the test dies without stopping it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// `go test` runs the test binary as a child of the go command, which dies on
// SIGTERM without passing it on: ask for a SIGTERM when our parent dies, so
// that the handler in TestMain still stops what the test started. init runs
// on the main thread, the one the setting must be made on.
func init() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}
