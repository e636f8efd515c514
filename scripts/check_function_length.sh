#!/usr/bin/env bash
# Lists functions over 80 lines (issue 33) in src/, tests and generated code aside; exits 1 when
# there are any. The scanner is scripts/check_function_length.py; see its header for the rules.
#   scripts/check_function_length.sh [--limit N] [DIR_OR_FILE...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
exec python3 scripts/check_function_length.py "$@"
