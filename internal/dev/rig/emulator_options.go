package rig

import (
	"context"
	"path/filepath"
)

// EmulatorOptions configure the install and start of an AWS emulator run as
// a host process (MiniStack, LocalStack). The zero value installs into
// DefaultHome and starts on a free port.
type EmulatorOptions struct {
	// Home is where the emulator is installed (default DefaultHome).
	Home string
	// Dir is the run directory, for its log and temporary files; required
	// to start it.
	Dir string
	// Port is the 127.0.0.1 port to serve on; 0 picks a free one.
	Port int
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// StartProcess starts the emulator and the install's commands (default
	// StartProcess); the e2e test passes its own, which lists every process
	// so that a signal to the test stops them all.
	StartProcess func(ProcessSpec) (*Process, error)
}

// withDefaults fills in the zero fields; Home is made absolute.
func (o EmulatorOptions) withDefaults() (EmulatorOptions, error) {
	if o.Home == "" {
		h, err := DefaultHome()
		if err != nil {
			return o, err
		}
		o.Home = h
	}
	abs, err := filepath.Abs(o.Home)
	if err != nil {
		return o, err
	}
	o.Home = abs
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.StartProcess == nil {
		o.StartProcess = StartProcess
	}
	return o, nil
}

func (o EmulatorOptions) run(ctx context.Context, spec ProcessSpec) error {
	return runWith(ctx, o.StartProcess, spec)
}
