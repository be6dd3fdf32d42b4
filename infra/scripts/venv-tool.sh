#!/usr/bin/env bash
# venv-tool.sh NAME PIP_SPEC COMMAND [ARGS...]
# Runs COMMAND from a pinned PyPI package kept in its own venv under
# ${SAS_RIG_HOME:-$HOME/.cache/sas-rig}/NAME/venv-<version>. The first run
# installs it (needs PyPI once); later runs reuse it. Each pin gets its own
# venv, so checkouts with different pins never fight over one install.
set -euo pipefail

if [ "$#" -lt 3 ]; then
	echo "usage: $0 NAME PIP_SPEC COMMAND [ARGS...]" >&2
	exit 2
fi
name=$1 spec=$2 cmd=$3
shift 3

home="${SAS_RIG_HOME:-$HOME/.cache/sas-rig}/$name"
venv="$home/venv-${spec##*==}"

# The marker is written last, so an interrupted install is redone rather
# than mistaken for a finished one (a venv cannot be moved into place).
if [ ! -f "$venv/.installed" ]; then
	echo "$name: installing $spec into $venv" >&2
	rm -rf "$venv"
	mkdir -p "$home"
	python3 -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check "$spec"
	touch "$venv/.installed"
fi
exec "$venv/bin/$cmd" "$@"
