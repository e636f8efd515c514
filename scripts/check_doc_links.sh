#!/usr/bin/env bash
# The documentation points only at what exists. For each Markdown file (default: README.md and
# docs/*.md) it fails on
#  - a relative link `[text](target)` whose file or folder does not exist (relative to the file
#    that links), or whose `#anchor` names no heading of the Markdown file it points into;
#  - a repository path the text cites (`src/...`, `tests/...`, `deploy/...`, ...; `{a,b}` and `*`
#    are expanded) that does not exist; build outputs (`build/...`) are not checked;
#  - a Markdown file named without a folder (`DESIGN.md`) that no file of the repository is
#    called, or that is not next to the file citing it.
# Runs as the CTest `doc_links` (label docs) and alone:
#   scripts/check_doc_links.sh [FILE.md ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if (($#)); then files=("$@"); else files=(README.md docs/*.md); fi

# GitHub's anchors of a Markdown file's headings (fenced code blocks skipped): lower case, only
# letters, digits, spaces, `-` and `_` kept, spaces turned into `-`.
anchors() {
  awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
    sed -E 's/[[:upper:]]+/\L&/g; s/[^a-z0-9 _-]//g; s/ /-/g'
}

# Every reference as "<line>\t<kind>\t<token>": kind link (a link's target), path (a cited
# repository path), md (a bare Markdown file name).
references() {
  awk '
    BEGIN { OFS = "\t" }
    /^```/ { next }
    {
      s = $0
      while (match(s, /\]\([^) ]+\)/)) {
        print FNR, "link", substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, 1, RSTART) substr(s, RSTART + RLENGTH)
      }
      t = " " s
      re = "[^A-Za-z0-9_./@-](src|cmd|scripts|tests|deploy|bench|tools|examples|proto|docs|cmake"
      re = re "|\\.ci)/[A-Za-z0-9_.@/{},*-]*"
      while (match(t, re)) {
        print FNR, "path", substr(t, RSTART + 1, RLENGTH - 1)
        t = substr(t, RSTART + RLENGTH)
      }
      t = " " s
      while (match(t, /[^A-Za-z0-9_.\/-][A-Za-z0-9_-][A-Za-z0-9_.-]*\.md([^A-Za-z0-9_]|$)/)) {
        name = substr(t, RSTART + 1, RLENGTH - 1)
        sub(/[^A-Za-z0-9_]$/, "", name)
        print FNR, "md", name
        t = substr(t, RSTART + RLENGTH - 1)
      }
    }' "$1"
}

# A cited path, `{a,b}` (one group) expanded and trailing punctuation dropped: exists?
path_exists() {
  local p=${1%%[.,:;]} pre body post alt
  p=${p%%[.,:;]}
  if [[ $p =~ ^([^{]*)\{([^}]*)\}(.*)$ ]]; then
    pre=${BASH_REMATCH[1]} body=${BASH_REMATCH[2]} post=${BASH_REMATCH[3]}
    IFS=, read -ra alts <<<"$body"
    for alt in "${alts[@]}"; do path_exists "$pre$alt$post" || return 1; done
    return 0
  fi
  if [[ $p == *'*'* ]]; then compgen -G "$p" >/dev/null; else [[ -e $p ]]; fi
}

mapfile -t md_names < <(find . -name '*.md' -not -path './build*' -not -path './.git/*' \
                          -printf '%f\n' | sort -u)
problems=0
checked=0
report() {
  echo "$1" >&2
  problems=$((problems + 1))
}
for f in "${files[@]}"; do
  [[ -f $f ]] || { report "$f: no such file"; continue; }
  dir=$(dirname "$f")
  while IFS=$'\t' read -r line kind token; do
    checked=$((checked + 1))
    case $kind in
      link)
        case $token in http://* | https://* | mailto:*) continue ;; esac
        target=${token%%#*}
        anchor=""
        [[ $token == *'#'* ]] && anchor=${token#*#}
        if [[ -z $target ]]; then target=$f; else target=$dir/$target; fi
        if [[ ! -e $target ]]; then
          report "$f:$line: link to $token: no such file ($target)"
        elif [[ -n $anchor && $target == *.md ]] &&
             ! anchors "$target" | grep -qxF -- "$anchor"; then
          report "$f:$line: link to $token: no heading of $target has the anchor #$anchor"
        fi
        ;;
      path)
        path_exists "$token" || report "$f:$line: cites $token, which the repository does not have"
        ;;
      md)
        if [[ ! -e $dir/$token ]] && ! printf '%s\n' "${md_names[@]}" | grep -qxF -- "$token"; then
          report "$f:$line: names $token, which the repository does not have"
        fi
        ;;
    esac
  done < <(references "$f")
done
if ((problems)); then
  echo "check_doc_links: $problems dangling reference(s) in ${files[*]}" >&2
  exit 1
fi
echo "check_doc_links: ${#files[@]} files, $checked references, all resolve"
