#!/usr/bin/env bash
# Installs the schema packages (npm ci, from package-lock.json, into <work-dir>, once per lock
# file) and validates the given JSON arrays of objects against them (validate.cjs).
#   run.sh <work-dir> <objects.json>...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1
shift
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/package-lock.json" || [[ ! -d "$work/node_modules" ]]; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
cp "$here/validate.cjs" "$work/"
exec node "$work/validate.cjs" "$@"
