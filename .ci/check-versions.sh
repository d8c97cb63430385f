#!/usr/bin/env bash
# check-versions.sh: every OpenTelemetry Collector core module at one core release and every
# contrib module at one contrib release, across all go.mod files, the ocb manifests and the
# Makefile's ocb version. Exceptions, with their reasons: .ci/version-exceptions.txt.
# Exits 1 naming each module off its release.
set -euo pipefail
cd "$(dirname "$0")/.."

CORE_V0=${CORE_V0:-v0.164.0}
CORE_V1=${CORE_V1:-v1.70.0}
CONTRIB=${CONTRIB:-v0.161.0}
EXCEPTIONS=.ci/version-exceptions.txt

# uses prints "FILE MODULE VERSION" for every collector module a file pins.
uses() {
  local f
  for f in $(git ls-files '*go.mod' 2>/dev/null || find . -name go.mod -not -path './build/*' | sed 's|^\./||'); do
    # require lines, in blocks or single; replace targets that name a version.
    awk -v file="$f" '
      /^require[ \t]*\(/ { inblock = 1; next }
      inblock && /^\)/   { inblock = 0; next }
      inblock            { print file, $1, $2; next }
      /^require[ \t]/    { print file, $2, $3; next }
      /^replace[ \t]/ && /=>/ { n = split($0, side, "=>"); split(side[2], t, " "); if (t[2] != "") print file, t[1], t[2] }
    ' "$f"
  done
  for f in builder-config.yaml testbed/peer/builder-config.yaml; do
    [ -f "$f" ] || continue
    awk -v file="$f" '$1 == "-" && $2 == "gomod:" { print file, $3, $4 } $1 == "gomod:" { print file, $2, $3 }' "$f"
  done
  awk '$1 == "OCB_VERSION" { print "Makefile", "go.opentelemetry.io/collector/cmd/builder", $3 }' Makefile
}

excepted() { # file module version
  local efile emod ever _
  while read -r efile emod ever _; do
    [ -z "$efile" ] || [ "${efile:0:1}" = "#" ] && continue
    # shellcheck disable=SC2053 # patterns on purpose
    if [[ $1 == $efile && $2 == $emod && $3 == "$ever" ]]; then return 0; fi
  done < "$EXCEPTIONS"
  return 1
}

drift=0
while read -r file module version; do
  case "$module" in
    go.opentelemetry.io/collector | go.opentelemetry.io/collector/*)
      want="$CORE_V0 / $CORE_V1"; [ "$version" = "$CORE_V0" ] || [ "$version" = "$CORE_V1" ] && continue ;;
    github.com/open-telemetry/opentelemetry-collector-contrib/*)
      want="$CONTRIB"; [ "$version" = "$CONTRIB" ] && continue ;;
    *) continue ;;
  esac
  excepted "$file" "$module" "$version" && continue
  echo "version drift: $file: $module $version; the release is $want (if the module proxy forces it, list it with the reason in $EXCEPTIONS)" >&2
  drift=1
done < <(uses)

# An exception for a module at its release anyway, or used nowhere, is stale.
# (Only exact module names: patterns cover families.)
while read -r efile emod ever _; do
  [ -z "$efile" ] || [ "${efile:0:1}" = "#" ] && continue
  [[ $emod == *"*"* ]] && continue
  if ! uses | awk -v m="$emod" -v v="$ever" '$2 == m && $3 == v { found = 1 } END { exit !found }'; then
    echo "stale exception in $EXCEPTIONS: $emod $ever is used nowhere" >&2; drift=1
  fi
done < "$EXCEPTIONS"

if [ "$drift" -ne 0 ]; then
  exit 1
fi
echo "versions: core $CORE_V0 / $CORE_V1, contrib $CONTRIB, $(wc -l < <(uses)) pins checked"
