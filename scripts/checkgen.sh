#!/usr/bin/env bash
# Regenerates the bpf2go objects and bindings (make generate) and fails when
# they differ from what is committed (issue 22). Objects are compared by what
# a loader reads from them (lab/objcmp), not byte for byte: clang-19
# orders BTF types differently depending on the clone's absolute path, so two
# clean clones of one commit build objects that differ only in type IDs.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=(bpf lab/vm/probe)
make generate
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
git status --porcelain -- "${dirs[@]}" | while read -r st path; do
	case "$st $path" in
	"M "*.o)
		git show "HEAD:$path" >"$tmp"
		if go run ./lab/objcmp/cmd/objcmp "$tmp" "$path"; then
			echo "checkgen: $path differs from the committed object only in BTF type order; keeping the committed one" >&2
			git checkout -q -- "$path"
		fi
		;;
	esac
done
if [ -n "$(git status --porcelain -- "${dirs[@]}")" ]; then
	echo "bpf2go output differs from the committed objects; run make generate and commit:" >&2
	git status --porcelain -- "${dirs[@]}" >&2
	exit 1
fi
