#!/usr/bin/env bash
# sam.sh ARGS... — the pinned AWS SAM CLI, in its own venv (venv-tool.sh).
# Run it from the repository root so it finds samconfig.toml (docs/sam.md).
set -euo pipefail
SAM_CLI_VERSION=1.170.0
here="$(cd "$(dirname "$0")" && pwd)"
# No usage data leaves this machine unless the user opts in.
export SAM_CLI_TELEMETRY="${SAM_CLI_TELEMETRY:-0}"
exec "$here/venv-tool.sh" sam "aws-sam-cli==$SAM_CLI_VERSION" sam "$@"
