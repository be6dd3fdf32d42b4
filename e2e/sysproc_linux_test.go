//go:build e2e && linux

package e2e

import "syscall"

// `go test` runs the test binary as a child of the go command, which dies on
// SIGTERM without passing it on: ask for a SIGTERM when our parent dies, so
// that the handler in TestMain still stops what the test started. (What the
// test starts is killed when the test dies: see rig.Process.) init runs on
// the main thread, the one the setting must be made on.
func init() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}
