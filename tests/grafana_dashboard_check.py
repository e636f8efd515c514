#!/usr/bin/env python3
"""Static checks for a Grafana dashboard against the metrics hami-cpp exports.

Usage:
  grafana_dashboard_check.py DASHBOARD.json METRICS.txt [METRICS.txt ...]
  grafana_dashboard_check.py --self-test

Checks: the file is JSON with title, uid, panels, templating and schemaVersion; panel ids are
unique (panels nested in rows' "panels" included); every panel has a gridPos of non-negative
ints with 1 <= w, x + w <= 24, h >= 1, and no two panels overlap (top-level panels with each
other; the children of a collapsed row with each other, since Grafana stores them at the
positions they take when the row is expanded); every target has a non-empty expr and a
datasource; every $variable an expr uses is defined in templating (Grafana's $__ builtins
aside); every metric name used in an expr or a templating query is a sample name (or a
"# HELP name" line) in at least one METRICS.txt (Prometheus text exposition).

Metric names are found by a small PromQL scanner, not a parser: strings, $variables, label
matchers {...}, ranges [...] and the label lists of by/without/on/ignoring/group_left/
group_right are dropped, then every identifier that is not a call (followed by "("), not a
PromQL keyword/function/aggregation, and not part of a number or duration counts as a metric.

Prints every problem with its panel's title and exits 1; otherwise prints
"ok: N panels, M metric names" (N counts every panel, rows and row children included).
Python 3.11 standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile

GRID_WIDTH = 24

# PromQL words that are not metric names: aggregations, functions, modifiers, operators, and
# the Grafana variable-query helpers.
PROMQL_WORDS = frozenset(
    """
    sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk
    limit_ratio by without on ignoring group_left group_right bool and or unless offset
    atan2 inf nan
    abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes
    clamp clamp_max clamp_min cos cosh count_over_time day_of_month day_of_week day_of_year
    days_in_month deg delta deriv exp floor histogram_avg histogram_count histogram_fraction
    histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters
    double_exponential_smoothing hour idelta increase irate label_join label_replace
    last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute month pi
    predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin
    sinh sort sort_desc sort_by_label sort_by_label_desc sqrt stddev_over_time
    stdvar_over_time sum_over_time tan tanh time timestamp vector year
    label_values label_names metrics query_result
    """.split()
)

_LABEL_LIST_RE = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_VAR_RE = re.compile(r"\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]")
_TOKEN_RE = re.compile(
    r"(?P<num>0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?[a-zA-Z0-9]*"
    r"|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)"
)
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def _drop_bracketed(text: str, open_ch: str, close_ch: str) -> str:
    """Empties every open_ch...close_ch group (no nesting expected inside them)."""
    out, depth = [], 0
    for ch in text:
        if ch == open_ch:
            if depth == 0:
                out.append(ch)
            depth += 1
        elif ch == close_ch and depth:
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def variables_in(expr: str) -> set[str]:
    names = set()
    for m in _VAR_RE.finditer(expr):
        names.add(m.group(1) or m.group(2) or m.group(3))
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression refers to (see the module docstring)."""
    text = _STRING_RE.sub('""', expr)
    text = _VAR_RE.sub(" ", text)
    text = _drop_bracketed(text, "{", "}")
    text = _drop_bracketed(text, "[", "]")
    # One pass only: "by (a) (m)" must keep "(m)", which a second pass would eat.
    text = _LABEL_LIST_RE.sub(lambda m: f" {m.group(1)} ", text)
    names = set()
    for m in _TOKEN_RE.finditer(text):
        word = m.group("ident")
        if word is None:
            continue
        rest = text[m.end():].lstrip()
        if rest.startswith("("):
            continue  # a function call or an aggregation
        if word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


_LABEL_VALUES_RE = re.compile(r"^\s*label_values\s*\((?:(.+),)?\s*([A-Za-z_$][A-Za-z0-9_]*)\s*\)\s*$", re.S)
_QUERY_RESULT_RE = re.compile(r"^\s*query_result\s*\((.*)\)\s*$", re.S)


def variable_query_metrics(query: str) -> set[str]:
    """Metric names a Grafana Prometheus variable query refers to."""
    if re.match(r"^\s*label_names\s*\(\s*\)\s*$", query):
        return set()
    m = _LABEL_VALUES_RE.match(query)
    if m:
        return metric_names(m.group(1)) if m.group(1) else set()
    m = re.match(r"^\s*metrics\s*\((.*)\)\s*$", query, re.S)
    if m:
        return set()  # a regex over metric names, not a selector
    m = _QUERY_RESULT_RE.match(query)
    if m:
        return metric_names(m.group(1))
    return metric_names(query)


def load_metric_names(text: str) -> set[str]:
    """Sample names and "# HELP" names in Prometheus text exposition."""
    names = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "#" and parts[1] == "HELP":
                names.add(parts[2])
            continue
        m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if m:
            names.add(m.group(0))
    return names


def _title(panel) -> str:
    if isinstance(panel, dict):
        return str(panel.get("title") or f"<untitled, id {panel.get('id')}>")
    return "<not an object>"


def _flatten(panels):
    """Yields (panel, group) for every panel; group is None at top level, else the row id."""
    for p in panels:
        yield p, None
        if isinstance(p, dict) and isinstance(p.get("panels"), list):
            for child in p["panels"]:
                yield child, ("row", id(p), _title(p))


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_dashboard(dash, known_metrics: set[str]) -> tuple[list[str], int, set[str]]:
    """Returns (problems, panel count, metric names used)."""
    problems: list[str] = []
    used: set[str] = set()
    if not isinstance(dash, dict):
        return ["dashboard: top level is not a JSON object"], 0, used
    for key in ("title", "uid", "panels", "templating", "schemaVersion"):
        if key not in dash:
            problems.append(f"dashboard: missing top-level key {key!r}")
    panels = dash.get("panels")
    if not isinstance(panels, list):
        if "panels" in dash:
            problems.append("dashboard: 'panels' is not a list")
        panels = []

    templating = dash.get("templating") or {}
    tlist = templating.get("list", []) if isinstance(templating, dict) else []
    defined_vars = set()
    for v in tlist:
        if not isinstance(v, dict):
            problems.append("templating: variable is not an object")
            continue
        name = v.get("name", "?")
        defined_vars.add(name)
        if v.get("type") != "query":
            continue
        q = v.get("query")
        texts = []
        if isinstance(q, str):
            texts.append(q)
        elif isinstance(q, dict):
            if isinstance(q.get("query"), str):
                texts.append(q["query"])
            if q.get("metric"):
                texts.append(str(q["metric"]))
        for text in texts:
            for metric in variable_query_metrics(text):
                used.add(metric)
                if metric not in known_metrics:
                    problems.append(f"variable ${name}: unknown metric {metric!r} in {text!r}")

    ids: dict[object, str] = {}
    boxes: dict[object, list[tuple[str, int, int, int, int]]] = {}
    count = 0
    for panel, group in _flatten(panels):
        count += 1
        title = _title(panel)
        if not isinstance(panel, dict):
            problems.append(f"panel {title}: not a JSON object")
            continue
        pid = panel.get("id")
        if not _is_int(pid):
            problems.append(f"panel {title!r}: id {pid!r} is not an integer")
        elif pid in ids:
            problems.append(f"panel {title!r}: duplicate id {pid} (also {ids[pid]!r})")
        else:
            ids[pid] = title

        gp = panel.get("gridPos")
        if not isinstance(gp, dict):
            problems.append(f"panel {title!r}: no gridPos")
        else:
            vals = {k: gp.get(k) for k in ("x", "y", "w", "h")}
            bad = [k for k, v in vals.items() if not _is_int(v) or v < 0]
            if bad:
                problems.append(f"panel {title!r}: gridPos {', '.join(bad)} not a non-negative int")
            else:
                x, y, w, h = vals["x"], vals["y"], vals["w"], vals["h"]
                if w < 1 or h < 1:
                    problems.append(f"panel {title!r}: gridPos w and h must be at least 1")
                if w > GRID_WIDTH or x + w > GRID_WIDTH:
                    problems.append(f"panel {title!r}: gridPos x + w = {x + w} exceeds {GRID_WIDTH}")
                # Children of an expanded row sit in the top-level layout; only those of a
                # collapsed row are laid out apart.
                key = None
                if group is not None:
                    row_collapsed = True
                    for p in panels:
                        if isinstance(p, dict) and id(p) == group[1]:
                            row_collapsed = bool(p.get("collapsed", False))
                    key = group[1] if row_collapsed else None
                boxes.setdefault(key, []).append((title, x, y, w, h))

        targets = panel.get("targets") or []
        if not isinstance(targets, list):
            problems.append(f"panel {title!r}: 'targets' is not a list")
            targets = []
        for t in targets:
            if not isinstance(t, dict):
                problems.append(f"panel {title!r}: target is not an object")
                continue
            ref = t.get("refId", "?")
            expr = t.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                problems.append(f"panel {title!r}: target {ref} has no expr")
                expr = ""
            ds = t.get("datasource")
            if not ds or (isinstance(ds, dict) and not (ds.get("uid") or ds.get("type"))):
                problems.append(f"panel {title!r}: target {ref} has no datasource")
            for var in sorted(variables_in(expr)):
                if not var.startswith("__") and var not in defined_vars:
                    problems.append(f"panel {title!r}: target {ref} uses undefined variable ${var}")
            for metric in sorted(metric_names(expr)):
                used.add(metric)
                if metric not in known_metrics:
                    problems.append(f"panel {title!r}: target {ref} uses unknown metric {metric!r}")

    for group_boxes in boxes.values():
        for i, (ta, xa, ya, wa, ha) in enumerate(group_boxes):
            for tb, xb, yb, wb, hb in group_boxes[i + 1:]:
                if xa < xb + wb and xb < xa + wa and ya < yb + hb and yb < ya + ha:
                    problems.append(
                        f"panel {ta!r}: gridPos overlaps panel {tb!r} "
                        f"({xa},{ya} {wa}x{ha} vs {xb},{yb} {wb}x{hb})")
    return problems, count, used


def run(dashboard_path: str, metrics_paths: list[str]) -> int:
    known: set[str] = set()
    for path in metrics_paths:
        try:
            with open(path, encoding="utf-8") as f:
                known |= load_metric_names(f.read())
        except OSError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
    try:
        with open(dashboard_path, encoding="utf-8") as f:
            dash = json.load(f)
    except OSError as e:
        print(f"{dashboard_path}: {e}", file=sys.stderr)
        return 1
    except json.JSONDecodeError as e:
        print(f"{dashboard_path}: invalid JSON: {e}")
        return 1
    problems, count, used = check_dashboard(dash, known)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"ok: {count} panels, {len(used)} metric names")
    return 0


# ---- self-test ---------------------------------------------------------------------------------

def _self_test() -> int:
    ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

    def panel(pid, title, x, y, w, h, *exprs):
        return {"id": pid, "title": title, "type": "timeseries", "datasource": ds,
                "gridPos": {"x": x, "y": y, "w": w, "h": h},
                "targets": [{"refId": chr(65 + i), "expr": e, "datasource": ds}
                            for i, e in enumerate(exprs)]}

    templating = {"list": [{"name": "node", "type": "query", "datasource": ds,
                            "query": 'label_values(gpu_used{zone="vGPU"}, node)'},
                           {"name": "pod", "type": "query", "datasource": ds,
                            "query": {"query": "label_values(ctr_used, pod)", "refId": "V"}}]}
    metrics_text = (
        "# HELP gpu_used Used.\n# TYPE gpu_used gauge\n"
        'gpu_used{node="a",device_uuid="GPU-1"} 1\n'
        "gpu_limit 2\n"
        'ctr_used{pod="p"} 3 1700000000\n'
        "# HELP help_only Declared but no samples.\n"
        "# TYPE type_only gauge\n"
    )
    known = load_metric_names(metrics_text)
    assert known == {"gpu_used", "gpu_limit", "ctr_used", "help_only"}, known

    # The scanner on its own.
    cases = {
        'sum by (node, device_uuid) (rate(foo_total{a="b",c=~"$node"}[5m])) '
        '/ on(device_uuid) group_left(node, x) bar offset 5m': {"foo_total", "bar"},
        "sum(a)/sum(b)": {"a", "b"},
        "max(x) by (le) > 0.5e3 and on() vector(1)": {"x"},
        'label_replace(up{job="j"}, "dst", "$1", "src", "(.*)")': {"up"},
        "count(ns:metric:rate5m[$__rate_interval:1m]) or vector(0)": {"ns:metric:rate5m"},
        'sum without (pod) (m1) unless ignoring(pod) m2 @ 1609746000': {"m1", "m2"},
        "histogram_quantile(0.9, sum by (le) (rate(h_bucket[5m])))": {"h_bucket"},
        "topk(5, ${metric} + $__interval_ms)": set(),
        "{__name__=\"x\"}": set(),
        "time() - max(ts_seconds{job=\"a\"}) > bool 1h": {"ts_seconds"},
    }
    for expr, want in cases.items():
        got = metric_names(expr)
        assert got == want, (expr, got, want)
    assert variable_query_metrics('label_values(m{node=~"$node"}, device_uuid)') == {"m"}
    assert variable_query_metrics("label_values(node)") == set()
    assert variable_query_metrics("query_result(sum by (a) (q))") == {"q"}
    assert variables_in('x{a="$a",b="${b:regex}",c="[[c]]"} $__rate_interval') == {
        "a", "b", "c", "__rate_interval"}

    good = {
        "title": "t", "uid": "u", "schemaVersion": 39, "templating": templating,
        "panels": [
            {"id": 1, "type": "row", "title": "Row", "collapsed": False,
             "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}, "panels": []},
            panel(2, "Used", 0, 1, 12, 8, 'gpu_used{node=~"$node"}'),
            panel(3, "Ratio", 12, 1, 12, 8, "sum(gpu_used) / sum(gpu_limit)"),
            {"id": 4, "type": "row", "title": "Collapsed", "collapsed": True,
             "gridPos": {"x": 0, "y": 9, "w": 24, "h": 1},
             "panels": [panel(5, "Pods", 0, 10, 24, 8, 'ctr_used{pod=~"$pod"} + help_only')]},
            panel(6, "Below", 0, 10, 24, 4, "gpu_limit"),
        ],
    }
    problems, count, used = check_dashboard(good, known)
    assert problems == [], problems
    assert count == 6 and used == {"gpu_used", "gpu_limit", "ctr_used", "help_only"}, (count, used)

    bad = json.loads(json.dumps(good))
    bad["panels"][2]["gridPos"] = {"x": 6, "y": 2, "w": 12, "h": 7}      # overlaps "Used"
    bad["panels"][3]["panels"][0]["id"] = 2                               # duplicate id
    bad["panels"][4]["targets"][0]["expr"] = "sum(gpu_limitt) + type_only"  # unknown metrics
    bad["panels"].append(panel(7, "Wide", 20, 30, 8, 2, ""))              # x + w > 24, no expr
    bad["panels"].append(panel(8, "NoDs", 0, 40, 4, 2, 'gpu_used{node="$nodes"}'))
    del bad["panels"][-1]["targets"][0]["datasource"]
    bad["templating"]["list"][0]["query"] = "label_values(gpu_usd, node)"
    del bad["uid"]
    problems, _, _ = check_dashboard(bad, known)
    text = "\n".join(problems)

    def expect(fragment):
        assert fragment in text, f"expected {fragment!r} in:\n{text}"

    expect("panel 'Used': gridPos overlaps panel 'Ratio'")
    expect("panel 'Pods': duplicate id 2 (also 'Used')")
    expect("panel 'Below': target A uses unknown metric 'gpu_limitt'")
    expect("panel 'Below': target A uses unknown metric 'type_only'")
    expect("panel 'Wide': gridPos x + w = 28 exceeds 24")
    expect("panel 'Wide': target A has no expr")
    expect("panel 'NoDs': target A has no datasource")
    expect("panel 'NoDs': target A uses undefined variable $nodes")
    expect("variable $node: unknown metric 'gpu_usd'")
    expect("dashboard: missing top-level key 'uid'")
    assert len(problems) == 10, problems

    # A row child overlapping a top-level panel counts once the row is expanded.
    expanded = json.loads(json.dumps(good))
    expanded["panels"][3]["collapsed"] = False
    problems, _, _ = check_dashboard(expanded, known)
    assert any("'Pods': gridPos overlaps panel 'Below'" in p or
               "'Below': gridPos overlaps panel 'Pods'" in p for p in problems), problems

    # End to end through files, as the command line uses it.
    with tempfile.TemporaryDirectory() as tmp:
        dpath, mpath = os.path.join(tmp, "d.json"), os.path.join(tmp, "m.txt")
        with open(mpath, "w", encoding="utf-8") as f:
            f.write(metrics_text)
        with open(dpath, "w", encoding="utf-8") as f:
            f.write("{ not json")
        devnull = open(os.devnull, "w")
        saved, sys.stdout = sys.stdout, devnull
        try:
            assert run(dpath, [mpath]) == 1
            with open(dpath, "w", encoding="utf-8") as f:
                json.dump(bad, f)
            assert run(dpath, [mpath]) == 1
            with open(dpath, "w", encoding="utf-8") as f:
                json.dump(good, f)
            assert run(dpath, [mpath]) == 0
        finally:
            sys.stdout = saved
            devnull.close()
    print("self-test ok")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return _self_test()
    if len(argv) < 3 or argv[1].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return run(argv[1], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
