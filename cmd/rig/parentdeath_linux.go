package main

import "syscall"

// `go run ./cmd/rig` runs the rig as a child of the go command, which dies
// on SIGTERM without passing it on. Ask the kernel for a SIGTERM when our
// parent dies, so the rig still stops its emulators and never outlives
// whoever started it. init runs on the main thread, which is the one the
// setting must be made on.
func init() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}
