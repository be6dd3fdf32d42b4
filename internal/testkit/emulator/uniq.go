package emulator

import (
	"sync/atomic"
	"time"
)

var counter atomic.Int64

func init() { counter.Store(time.Now().UnixNano() % 1_000_000_000) }

func uniq() int64 { return counter.Add(1) }
