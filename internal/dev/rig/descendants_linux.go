package rig

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procStat reads a process's parent and start time from /proc/<pid>/stat.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// The command (field 2) is in parentheses and may hold spaces.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], true // field 22: start time
}

// descendants lists the processes below root, each with its start time (a
// pid reused later is then not mistaken for it).
func descendants(root int) map[int]string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	start := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, st, ok := procStat(pid); ok {
			parent[pid], start[pid] = pp, st
		}
	}
	out := map[int]string{}
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out[pid] = start[pid]
				break
			}
		}
	}
	return out
}

// stopStragglers stops the processes of desc that still run (same pid,
// same start time): SIGTERM, then SIGKILL after grace.
func stopStragglers(desc map[int]string, grace time.Duration) {
	alive := func() []int {
		var pids []int
		for pid, st := range desc {
			if _, now, ok := procStat(pid); ok && now == st {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	left := alive()
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(grace); len(left) > 0 && time.Now().Before(deadline); left = alive() {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
