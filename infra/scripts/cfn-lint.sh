#!/usr/bin/env bash
# cfn-lint.sh TEMPLATE... — the pinned cfn-lint, in its own venv (venv-tool.sh).
set -euo pipefail
CFN_LINT_VERSION=1.58.0
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$#" -eq 0 ]; then
	echo "usage: $0 TEMPLATE..." >&2
	exit 2
fi
echo "cfn-lint $CFN_LINT_VERSION: $*" >&2
exec "$here/venv-tool.sh" cfnlint "cfn-lint==$CFN_LINT_VERSION" cfn-lint --format parseable -- "$@"
