package rig

import "syscall"

// emulatorSysProcAttr puts an emulator in its own process group and has the
// kernel kill it if the rig dies without stopping it (SIGKILL, a crash, a
// test binary's timeout panic).
func emulatorSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
