package main

import (
	"runtime/debug"
	"strings"
)

// installSasctl is the command that installs the sasctl matching this
// server: at its release's version when it was built from a tagged module,
// else the latest release (or, in a clone, `go install ./cmd/sasctl`).
func installSasctl() string {
	return "go install github.com/sas-go/sas/cmd/sasctl@" + releaseVersion() + " (in a clone of the repository: go install ./cmd/sasctl)"
}

// releaseVersion is the main module's version when it is a release
// (v1.2.3), else "latest": a build in a clone reports "(devel)" or a
// pseudo-version no proxy serves.
func releaseVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		if strings.HasPrefix(v, "v") && !strings.Contains(v, "-") && !strings.Contains(v, "+") {
			return v
		}
	}
	return "latest"
}
