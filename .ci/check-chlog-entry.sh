#!/usr/bin/env bash
# check-chlog-entry.sh: a branch that changes what users get adds a changelog entry.
#
# Compares the work tree (commits and uncommitted changes) with its merge base with main
# (CHLOG_BASE, default main, else origin/main). A change to a component's non-test Go code, README
# or metadata.yaml, or to pkg/'s non-test Go code, needs an added or changed .chloggen/*.yaml;
# a commit message of the branch with `[chlog skip]` waives it (a refactoring, a comment).
# Where there is no base to compare with (a shallow or single-branch clone, as CI checkouts often
# are) or the work tree is the base, it says so and passes: the check guards branches before
# they are merged; CHANGELOG.md itself is checked by `chlog check` everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

base=""
for ref in ${CHLOG_BASE:-} main origin/main; do
  if git rev-parse --verify -q "$ref^{commit}" >/dev/null 2>&1; then base=$ref; break; fi
done
if [ -z "$base" ] || ! mb=$(git merge-base HEAD "$base" 2>/dev/null); then
  echo "chlog-entry: no main branch to compare with: skipped"
  exit 0
fi

changed=$( { git diff --name-only "$mb" --; git ls-files --others --exclude-standard; } | sort -u)
visible=$(grep -E '^(svc[a-z]+/([^/]+/)*[^/]+\.go|svc[a-z]+/README\.md|svc[a-z]+/metadata\.yaml|pkg/([^/]+/)*[^/]+\.go)$' <<<"$changed" |
  grep -v -E '_test\.go$|/testdata/' || true)
if [ -z "$visible" ]; then
  echo "chlog-entry: no component change since $(git rev-parse --short "$mb") ($base)"
  exit 0
fi
if grep -E '^\.chloggen/.+\.yaml$' <<<"$changed" | grep -qv '^\.chloggen/TEMPLATE\.yaml$'; then
  echo "chlog-entry: component changes since $(git rev-parse --short "$mb") ($base) come with a .chloggen entry"
  exit 0
fi
if git log --format=%B "$mb..HEAD" | grep -qF '[chlog skip]'; then
  echo "chlog-entry: component changes without a .chloggen entry, waived by [chlog skip]"
  exit 0
fi
echo "chlog-entry: these files changed since $(git rev-parse --short "$mb") ($base) and no .chloggen entry was added:" >&2
sed 's/^/  /' <<<"$visible" >&2
echo "add one (make chlog-new NAME=...), or say [chlog skip] in a commit message if users see no change" >&2
exit 1
