package rig

import (
	"context"
	"errors"
	"testing"
)

// onFreePort tries a fixed port once, and free ports up to portTries times
// while the start says the port may be to blame and the context lives.
func TestOnFreePortRetriesOnlyWhatThePortMayExplain(t *testing.T) {
	boom := errors.New("taken")
	count := func(ctx context.Context, fixed int, again bool) (ports []int, err error) {
		err = onFreePort(ctx, fixed, func(port int) (bool, error) {
			ports = append(ports, port)
			return again, boom
		})
		return ports, err
	}
	ports, err := count(t.Context(), 0, true)
	if !errors.Is(err, boom) || len(ports) != portTries || ports[0] == 0 {
		t.Fatalf("free ports, failing on the port: tried %v, err %v; want %d ports and the last error", ports, err, portTries)
	}
	if ports, err := count(t.Context(), 4321, true); !errors.Is(err, boom) || len(ports) != 1 || ports[0] != 4321 {
		t.Fatalf("a fixed port: tried %v, err %v; want it once", ports, err)
	}
	if ports, err := count(t.Context(), 0, false); !errors.Is(err, boom) || len(ports) != 1 {
		t.Fatalf("a failure that is not the port's: tried %v, err %v; want one try", ports, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ports, err := count(ctx, 0, true); !errors.Is(err, boom) || len(ports) != 1 {
		t.Fatalf("the context ended: tried %v, err %v; want one try", ports, err)
	}
	tries := 0
	if err := onFreePort(t.Context(), 0, func(int) (bool, error) {
		if tries++; tries < 2 {
			return true, boom
		}
		return false, nil
	}); err != nil || tries != 2 {
		t.Fatalf("success on the second port: %d tries, err %v", tries, err)
	}
}
