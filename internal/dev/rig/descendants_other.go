//go:build !linux

package rig

import "time"

// descendants is not implemented outside Linux: Stop then reaches only
// LocalStack's process group.
func descendants(int) map[int]string { return nil }

func stopStragglers(map[int]string, time.Duration) {}
