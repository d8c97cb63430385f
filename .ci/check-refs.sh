#!/usr/bin/env bash
# check-refs.sh: every file that the repository's comments and documents cite is in the repository.
#
# - Markdown links `[text](path)` in *.md files: path (without #anchor) exists, relative to the file.
# - File references `<file>.md` / `<dir>/<file>.md` in Go, YAML, shell, text files, the Makefile and
#   markdown: the file exists relative to the citing file's directory, one of its parents, or the
#   repository root, or (a bare name) anywhere in it. So a citation of a document that lives
#   outside the repository fails.
# - Section references `docs/<name>.md §N` (and `§N, §M` lists after it): the document has a
#   heading numbered N (`## N.` or `### N.M`).
# Exits 1 naming each broken reference as FILE:LINE.
set -euo pipefail
trap 'echo "check-refs: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/.."

files() {
  { git ls-files -- '*.go' '*.md' '*.yaml' '*.yml' '*.txt' '*.sh' 'Makefile' '*Dockerfile' 2>/dev/null ||
    find . -type f \( -name '*.go' -o -name '*.md' -o -name '*.yaml' -o -name '*.yml' -o -name '*.txt' \
      -o -name '*.sh' -o -name Makefile -o -name '*Dockerfile' \) -not -path './.git/*' | sed 's|^\./||'
  } | grep -v -e '^build/' -e '^\.tools/' -e '/node_modules/' || true
}

# exists_from DIR PATH: PATH exists relative to DIR, one of DIR's parents, or the root; a bare
# name (no directory) may also name a file anywhere in the repository (a generated report).
exists_from() {
  local dir=$1 path=$2
  [ -e "$path" ] && return 0
  [[ $path != */* ]] && [ -n "${basenames[$path]+x}" ] && return 0
  while :; do
    [ -e "$dir/$path" ] && return 0
    [ "$dir" = . ] && return 1
    dir=$(dirname "$dir")
  done
}

broken=0
report() { echo "broken reference: $1: $2" >&2; broken=1; }

mapfile -t all < <(files)
declare -A basenames
while IFS= read -r f; do basenames[${f##*/}]=1; done < <(git ls-files 2>/dev/null || find . -type f -not -path './.git/*')

# 1. Markdown links.
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; target=${rest#*:}
  target=${target#*](}; target=${target%)}; target=${target%% *}; target=${target%%#*}
  case "$target" in ''|http://*|https://*|mailto:*) continue ;; esac
  [ -e "$(dirname "$file")/$target" ] || report "$file:$line" "link to $target (no such file)"
done < <(printf '%s\n' "${all[@]}" | grep '\.md$' | xargs -r grep -noE '\]\([^) ]+( "[^"]*")?\)' || true)

# 2. File references to *.md documents: in Go files, in comments only (a string may name a file
# that a program writes).
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
  ref=${ref#./}
  exists_from "$(dirname "$file")" "$ref" || report "$file:$line" "$ref (not in the repository; cite docs/, e.g. docs/contract.md §N)"
done < <(
  { printf '%s\n' "${all[@]}" | grep '\.go$' | xargs -r grep -nE '//.*[A-Za-z0-9_-]\.md' | sed -E 's|^([^:]+:[0-9]+:)[^/]*(/[^/][^/]*)*//|\1//|' || true
    printf '%s\n' "${all[@]}" | grep -v '\.go$' | xargs -r grep -nE '[A-Za-z0-9_-]\.md' || true
  } | awk '{
    i = index($0, ":"); file = substr($0, 1, i - 1); rest = substr($0, i + 1)
    j = index(rest, ":"); line = substr(rest, 1, j - 1); text = " " substr(rest, j + 1) " "
    while (match(text, /[^A-Za-z0-9_.\/:-][A-Za-z0-9_.\/-]*[A-Za-z0-9_-]\.md[^A-Za-z0-9_]/)) {
      print file ":" line ":" substr(text, RSTART + 1, RLENGTH - 2)
      text = substr(text, RSTART + RLENGTH - 1)
    }
  }')

# 3. Sections of docs/*.md.
declare -A sections
for doc in docs/*.md; do
  sections[$doc]=" $({ grep -oE '^#{2,4} [0-9]+(\.[0-9]+)*\.? ' "$doc" || true; } | awk '{ sub(/\.$/, "", $2); printf "%s ", $2 }')"
done
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; ref=${rest#*:}
  doc=${ref%% *}
  [ -n "${sections[$doc]+x}" ] || continue # a missing doc is reported by check 2
  for n in $(grep -oE '§[0-9]+(\.[0-9]+)*' <<<"$ref" | tr -d '§'); do
    [[ ${sections[$doc]} == *" $n "* ]] || report "$file:$line" "$doc has no section §$n"
  done
done < <(printf '%s\n' "${all[@]}" | xargs -r grep -noE 'docs/[a-z-]+\.md §[0-9.]*[0-9](, §[0-9.]*[0-9])*' || true)

if [ "$broken" -ne 0 ]; then
  exit 1
fi
echo "references: every cited file and docs/ section is in the repository (${#all[@]} files checked)"
