//go:build e2e && !linux

package e2e

import "syscall"

// childSysProcAttr puts a child in its own process group, so that stopping
// it stops what it spawned. Without Linux's parent-death signal, a test that
// is killed outright (SIGKILL) leaves its children running.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
