#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (default 80 lines) under the given directories, and
with --file-limit N the source files longer than N lines.

A function's length runs from the first line of its declaration (return type, template header)
to the line of its closing brace. Tests (*_test.cc) and generated code (anything under a `gen`
folder) are skipped. The scan is a brace matcher, not a parser: comments, string and character
literals (raw strings included) and preprocessor lines are blanked first, then every `{` at
namespace or class scope is classified as a namespace, a class body, an initializer, or a
function body. Lambdas and local classes count towards the function that holds them.

Exit status: 0 when nothing is over the limits, 1 when something is, 2 on bad usage.
  scripts/check_function_length.sh [--limit N] [--file-limit N] [DIR_OR_FILE...]   (default: src)
"""

import argparse
import os
import re
import sys

# Keywords that may stand between a parameter list and its body.
BODY_SUFFIXES = {"const", "override", "final", "noexcept", "try", "mutable", "volatile"}
ACCESS_RE = re.compile(r"^\s*(public|private|protected)\s*:(?!:)")
IDENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"


def blank_code(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces.

    Newlines survive so line numbers stay right; a string literal keeps its quotes, so `extern
    "C"` still reads as extern followed by a literal.
    """
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # Preprocessor line, with backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            out.append(c)
            i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or text[i - 1] not in IDENT_CHARS):
            end = text.find(")" + raw.group(1) + '"', i + raw.end())
            j = n if end < 0 else end + len(raw.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
            continue
        if c == "'" and _is_digit_separator(text, i):
            out.append(c)
            i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _is_digit_separator(text, i):
    """True when the quote at i sits inside a numeric literal such as 1'000'000."""
    j = i
    while j > 0 and text[j - 1] in IDENT_CHARS + "'":
        j -= 1
    return j < i and text[j].isdigit()


def strip_template_prefix(header):
    """Removes a leading `template <...>` (balanced angle brackets) from a declaration."""
    m = re.match(r"\s*template\s*<", header)
    if not m:
        return header
    depth, k = 1, m.end()
    while k < len(header) and depth:
        depth += {"<": 1, ">": -1}.get(header[k], 0)
        k += 1
    return strip_template_prefix(header[k:])


def function_name(header):
    """The qualified name before the parameter list, e.g. `Ledger::BuildDevices`."""
    depth = 0
    for k, ch in enumerate(header):
        if ch == "<" and not header[:k].rstrip().endswith("operator"):
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            m = re.search(r"((?:[\w~]+\s*(?:<[^()]*>)?\s*::\s*)*(?:operator\s*\S+|[\w~]+))\s*$",
                          header[:k])
            if m:
                return re.sub(r"\s+", "", m.group(1))
    return header.strip().split("\n")[0][:60]


class Scanner:
    """Walks one blanked file, collecting (name, first_line, last_line) for function bodies."""

    def __init__(self, code):
        self.code = code
        self.functions = []

    def line_of(self, pos):
        return self.code.count("\n", 0, pos) + 1

    def skip_block(self, pos):
        """pos is just past a `{`; returns the position just past its matching `}`."""
        depth = 1
        while pos < len(self.code) and depth:
            ch = self.code[pos]
            depth += {"{": 1, "}": -1}.get(ch, 0)
            pos += 1
        return pos

    def scan_scope(self, pos, nested):
        """Scans declarations from pos until the scope's closing brace (or end of file)."""
        header_start = pos
        while pos < len(self.code):
            ch = self.code[pos]
            if ch == ";":
                header_start = pos + 1
            elif ch == "}":
                if nested:
                    return pos + 1
                header_start = pos + 1
            elif ch == "{":
                pos = self.open_brace(header_start, pos)
                if pos is None:
                    return len(self.code)
                if pos < 0:  # an initializer brace: the declaration goes on
                    pos = -pos
                    continue
                header_start = pos
                continue
            pos += 1
        return pos

    def open_brace(self, header_start, brace):
        """Handles a `{` at scope level; returns where scanning resumes (negated for an
        initializer, whose declaration continues after it)."""
        header = self.code[header_start:brace]
        access = ACCESS_RE.match(header)
        if access:
            header_start += access.end()
            header = header[access.end():]
        bare = strip_template_prefix(header).strip()
        words = re.findall(r"[A-Za-z_]\w*", bare)
        first = words[0] if words else ""
        before = header.rstrip()
        last = before[-1:] if before else ""
        after = brace + 1
        if first in ("namespace", "extern") and "(" not in bare:
            return self.scan_scope(after, nested=True)
        if first == "enum" or (first in ("class", "struct", "union") and last != ")"):
            if first == "enum":
                return self.skip_block(after)
            return self.scan_scope(after, nested=True)
        if self.is_function_body(bare, last, words):
            end = self.skip_block(after)
            start = header_start + len(header) - len(header.lstrip())
            self.functions.append((function_name(bare), self.line_of(start),
                                   self.line_of(end - 1)))
            return end
        return -self.skip_block(after)

    @staticmethod
    def is_function_body(bare, last, words):
        if "(" not in bare or bare.startswith("=") or re.match(r"^[\w:<>,\s*&]*=", bare):
            return False
        if last == ")":
            return True
        if last == "}":
            # A constructor whose initializer list ends with a braced member: `: b_{2} {`.
            return re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", bare) is not None
        if last and last in IDENT_CHARS and words:
            if words[-1] in BODY_SUFFIXES:
                return True
            # A trailing return type: `auto F() -> T {`.
            return "->" in bare[bare.rfind(")"):]
        return False


def scan_file(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        code = blank_code(f.read())
    scanner = Scanner(code)
    scanner.scan_scope(0, nested=False)
    return scanner.functions


def source_files(roots):
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "gen")
            for name in sorted(filenames):
                if name.endswith((".cc", ".h")) and not name.endswith("_test.cc"):
                    yield os.path.join(dirpath, name)


def main():
    parser = argparse.ArgumentParser(description="List C++ functions over a line limit.")
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument("--file-limit", type=int, default=0, help="0 = files are not checked")
    parser.add_argument("paths", nargs="*", default=["src"])
    args = parser.parse_args()
    over = []
    long_files = []
    for path in source_files(args.paths):
        if args.file_limit > 0:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = sum(1 for _ in f)
            if lines > args.file_limit:
                long_files.append((lines, path))
        for name, first, last in scan_file(path):
            length = last - first + 1
            if length > args.limit:
                over.append((length, path, first, name))
    for length, path, first, name in sorted(over, reverse=True):
        print(f"{length:5d} {path}:{first} {name}")
    for lines, path in sorted(long_files, reverse=True):
        print(f"{lines:5d} {path} (file)")
    if over:
        print(f"{len(over)} function(s) over {args.limit} lines", file=sys.stderr)
    if long_files:
        print(f"{len(long_files)} file(s) over {args.file_limit} lines", file=sys.stderr)
    if over or long_files:
        return 1
    print(f"no function over {args.limit} lines" +
          (f", no file over {args.file_limit} lines" if args.file_limit > 0 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
