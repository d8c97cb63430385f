#!/usr/bin/env bash
# check-generate.sh COMPONENT...: `make generate` would leave no diff. Runs the same mdatagen as
# `make generate` (the root module's `go tool mdatagen`) on a copy of each component and compares
# the copy with the working tree, so that nothing in the tree is overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."
mdatagen=$(go tool -n mdatagen)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stale=0
for c in "$@"; do
  cp -r "$c" "$tmp/$c"
  (cd "$tmp/$c" && "$mdatagen" metadata.yaml >/dev/null 2>"$tmp/$c.log") || { cat "$tmp/$c.log" >&2; exit 1; }
  if ! diff -r "$c" "$tmp/$c" >"$tmp/$c.diff"; then
    echo "generated files of $c are not current (run make generate):" >&2
    head -n 40 "$tmp/$c.diff" >&2
    stale=1
  fi
done
[ "$stale" -eq 0 ] && echo "generate: mdatagen output of $# components is current"
exit "$stale"
