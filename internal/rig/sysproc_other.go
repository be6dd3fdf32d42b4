//go:build !linux

package rig

import "syscall"

// emulatorSysProcAttr puts an emulator in its own process group. Outside
// Linux there is no parent-death signal: a rig killed with SIGKILL leaves
// its emulators running.
func emulatorSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
