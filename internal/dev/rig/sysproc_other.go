//go:build !linux

package rig

import "syscall"

// childSysProcAttr puts a child in its own process group. Outside Linux
// there is no parent-death signal: a parent killed with SIGKILL leaves its
// children running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
