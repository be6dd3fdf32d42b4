package rig

import "syscall"

// childSysProcAttr puts a child in its own process group and has the kernel
// kill it if its parent dies without stopping it (SIGKILL, a crash, a test
// binary's timeout panic).
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
