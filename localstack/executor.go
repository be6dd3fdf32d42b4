// Package localstack carries the source of the process executor for
// LocalStack's Lambda service (process-executor/, a Python package), so
// that the rig (internal/dev/rig) installs the executor of the checkout it was
// built from. README.md in this directory says what runs without Docker.
package localstack

import "embed"

// Executor is process-executor/: pyproject.toml and the sas_localstack_lambda
// package. ("all:" keeps __init__.py, which go:embed would skip.)
//
//go:embed all:process-executor
var Executor embed.FS
