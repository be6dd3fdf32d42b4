#!/usr/bin/env bash
# make release VERSION=vX.Y.Z (README, "Releasing"): checks the tree, sets
# every nested module's requirement of this repository's modules to VERSION,
# commits that, and tags every module at VERSION: the root as vX.Y.Z, a
# nested module at <dir>/vX.Y.Z, as the go command expects. Local only: it
# prints the push and pushes nothing. RELEASE_SKIP_TESTS=1 skips the tests
# (vet still runs), for trying the target.
set -euo pipefail

version=${1:-}
if [[ ! $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "release: want VERSION=vX.Y.Z, e.g. make release VERSION=v0.1.0 (got '$version')" >&2
	exit 2
fi
cd "$(git rev-parse --show-toplevel)"
if [[ -n $(git status --porcelain) ]]; then
	echo "release: the tree is not clean; commit or stash first:" >&2
	git status --short >&2
	exit 1
fi

# The nested modules: every tracked go.mod below the root.
mapfile -t dirs < <(git ls-files '*/go.mod' | xargs -r -n1 dirname | sort)
tags=("$version")
for d in "${dirs[@]}"; do tags+=("$d/$version"); done
for t in "${tags[@]}"; do
	if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
		echo "release: tag $t exists already" >&2
		exit 1
	fi
done

check() { # dir
	echo "release: $1: go vet"
	(cd "$1" && go vet ./...)
	if [[ ${RELEASE_SKIP_TESTS:-} != 1 ]]; then
		echo "release: $1: unit tests"
		(cd "$1" && SAS_NO_EMULATORS=1 go test -count=1 ./...)
	fi
}
check .
for d in "${dirs[@]}"; do check "$d"; done

# One version for all: each nested module requires this repository's
# modules at VERSION (its replace lines keep the tree building as it is).
declare -A path
path[.]=$(go list -m)
for d in "${dirs[@]}"; do path[$d]=$(cd "$d" && go list -m); done
for d in "${dirs[@]}"; do
	for other in . "${dirs[@]}"; do
		p=${path[$other]}
		if [[ $other != "$d" ]] && (cd "$d" && go mod edit -json | grep -q "\"Path\": \"$p\""); then
			(cd "$d" && go mod edit -require="$p@$version")
		fi
	done
done
if [[ -n $(git status --porcelain) ]]; then
	git commit -q -am "release $version: nested modules require $version"
	echo "release: committed the requirements at $version"
fi
for t in "${tags[@]}"; do
	git tag -a "$t" -m "sas $version"
	echo "release: tagged $t"
done
echo "release: nothing pushed; to publish:"
echo "  git push origin HEAD ${tags[*]}"
