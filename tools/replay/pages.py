"""report.html and report.md: the comparison a person reads.

report.html is one self-contained file: inline CSS, the figures embedded as PNG data
URIs, no JavaScript, so it opens anywhere and can be mailed. report.md has the same
tables and links the PNG files beside it. Each figure has its caption under it (the
figures carry no title: a paper sets its own) and names its PDF beside the page.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Iterable

from .metrics import METRIC_HELP
from .plots import FILL_FIGURE, Drawn

#: The summary table's columns (keys of a selector's figures in metrics.json).
SUMMARY = ("jobs", "jct_mean_s", "jct_p50_s", "jct_p95_s", "jct_p99_s", "queue_mean_s", "queue_p95_s",
           "gpu_allocation_mean", "frag_hol_mean", "frag_fgd_mean", "frag_fgd_idle_share", "consolidated_share",
           "one_rack_share", "slowdown_mean", "unfinished", "never_fits", "dropped", "wall_s")
HELP = {key: (heading, unit, meaning) for key, heading, unit, meaning in METRIC_HELP}


def cell(key: str, value: Any) -> str:
    """A figure as the tables show it: shares as %, seconds with separators, – for none;
    a count as a whole number with separators, also as a median over seeds (a float:
    ``8,680``, ``14.5``, never ``8.68e+03``)."""
    if value is None:
        return "–"
    unit = HELP.get(key, ("", "", ""))[1]
    if unit == "%":
        return f"{100 * value:.1f} %"
    if unit == "x":
        return f"{value:.2f}×"
    if isinstance(value, int):
        return f"{value:,}"
    if unit == "s" or key.endswith("_s"):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.3g}"


def heading(key: str) -> str:
    name, unit, _ = HELP.get(key, (key, "", ""))
    return f"{name} ({unit})" if unit in ("s",) else name


def summary_rows(document: dict[str, Any], keys=SUMMARY) -> tuple[list[str], list[list[str]]]:
    """The summary: a row per figure, a column per selector (a few selectors fit a page
    across; fifteen figures do not)."""
    selectors = document["selectors"]
    header = ["figure"] + list(selectors)
    if is_fill(document) and keys is SUMMARY:
        return header, _fill_summary(document)
    rows = [[heading(k)] + [cell(k, figures.get(k)) for figures in selectors.values()] for k in keys]
    return header, rows


#: Fill mode's own summary rows, explained: (heading, unit, meaning).
FILL_HELP = (
    ("unallocated GPU % at 100 % arrived", "%", "100 - allocated GPUs as % of capacity, once the pods arrived ask "
                                                "for as many GPUs as the cluster has; over several seeds the median "
                                                "and 25th-75th percentile"),
    ("pods placed", "", "pods placed at their arrival, of every pod the seed replayed (median over seeds)"),
    ("pods dropped", "", "pods that did not fit at their arrival and were dropped (median over seeds)"),
)
#: The METRIC_HELP entries fill mode's summary shows.
FILL_SUMMARY_KEYS = ("frag_fgd_mean", "wall_s")


def meanings(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(heading, unit, meaning) of each figure the summary can show: in fill mode only its own."""
    if is_fill(document):
        return [*FILL_HELP, *((HELP[key][0], HELP[key][1], HELP[key][2]) for key in FILL_SUMMARY_KEYS)]
    return [(name, unit, meaning) for _, name, unit, meaning in METRIC_HELP]


def _fill_summary(document: dict[str, Any]) -> list[list[str]]:
    """Fill mode's summary: pods never leave, so JCT and queueing mean nothing there; it shows
    what fill mode measures (the unallocated GPU % once every GPU has arrived, pods placed and
    dropped, the FGD fragmentation measure)."""
    selectors = document["selectors"].values()
    several = len(document["run"]["seeds"]) > 1
    full = []
    for figures in selectors:
        point = figures["unallocated_gpu_pct_at_arrived"].get(100, figures["unallocated_gpu_pct_at_arrived"].get("100"))
        if point is None or point["median"] is None:
            full.append("–")
        elif several:
            full.append(f"{point['median']:.1f} ({point['p25']:.1f}–{point['p75']:.1f})")
        else:
            full.append(f"{point['median']:.1f}")
    return [["unallocated GPU % at 100 % arrived" + (" (median, IQR)" if several else "")] + full,
            ["pods placed"] + [cell("jobs", figures["fill"]["placed"]) for figures in selectors],
            ["pods dropped"] + [cell("jobs", figures["fill"]["dropped"]) for figures in selectors],
            *([heading(key)] + [cell(key, figures.get(key)) for figures in selectors] for key in FILL_SUMMARY_KEYS)]


def group_rows(document: dict[str, Any], group: str) -> tuple[list[str], list[list[str]]]:
    """The by-queue or by-gang-size table (``group``: ``by_queue``, ``by_gang_size``), a row
    per group and selector: jobs, mean JCT and queueing; in fill mode, where pods never
    leave, what fill mode measures instead (:func:`_fill_group_row`)."""
    fill = is_fill(document)
    header = [group.replace("by_", "").replace("_", " "), "selector"] + (
        ["pods", "placed", "dropped", "GPUs asked", "GPUs placed", "GPUs placed, % of asked"] if fill
        else ["jobs", "JCT mean (s)", "queue mean (s)", "queue max (s)"])
    selectors = {name: figures["fill"] if fill else figures for name, figures in document["selectors"].items()}
    keys = list(dict.fromkeys(k for f in selectors.values() for k in f[group]))
    rows = []
    for key in keys:
        for name, figures in selectors.items():
            entry = figures[group].get(key)
            if entry and fill:
                rows.append([key, name, *_fill_group_row(entry)])
            elif entry:
                rows.append([key, name, cell("jobs", entry["jobs"]), cell("jct_mean_s", entry["jct_mean_s"]),
                             cell("queue_mean_s", entry["queue_mean_s"]), cell("queue_mean_s", entry.get("queue_max_s"))])
    return header, rows


#: What the by-queue and by-gang-size tables count in fill mode.
FILL_GROUP_NOTE = ("Fill mode: every pod, not only the measurement window's; pods never leave, so none has a "
                   "completion time: pods placed or dropped at their arrival, GPUs asked and placed (a share as "
                   "milli / 1000). "
                   "Gang size 0: pods that ask no GPU; <1: a share of one GPU. Medians over the seeds.")


def _fill_group_row(entry: dict[str, Any]) -> list[str]:
    share = entry["gpus_placed_share"]
    return [cell("jobs", entry["pods"]), cell("jobs", entry["placed"]), cell("jobs", entry["dropped"]),
            cell("jobs", entry["gpus_asked"]), cell("jobs", entry["gpus_placed"]),
            "–" if share is None else f"{100 * share:.1f} %"]


#: The fill table's rows: every this many % of GPUs arrived (metrics.json has every 1 %).
FILL_ROW_STEP = 5


def fill_rows(document: dict[str, Any], mark_lowest: bool = False) -> tuple[list[str], list[list[str]]]:
    """openb fill mode's headline: unallocated GPU % at every :data:`FILL_ROW_STEP` % of GPUs
    arrived (and the last), a column per selector: the median and, over several seeds, the
    interquartile range in brackets. ``mark_lowest``: the lowest median of a row (as shown) in
    ``**`` where one selector alone has it (where several share it, no cell stands out)."""
    selectors = document["selectors"]
    names = list(selectors)
    curves = {name: selectors[name]["unallocated_gpu_pct_at_arrived"] for name in names}
    several = len(document["run"]["seeds"]) > 1
    arrived = list(curves[names[0]])
    shown = [p for p in arrived if int(p) % FILL_ROW_STEP == 0]
    if arrived and arrived[-1] not in shown:
        shown.append(arrived[-1])
    rows = []
    for p in shown:
        row = [f"{p} %"]
        medians = [round(point["median"], 1) for name in names if (point := curves[name].get(p))]
        lowest = min(medians) if mark_lowest and medians.count(min(medians)) == 1 else None
        for name in names:
            point = curves[name].get(p)
            if point is None:
                row.append("–")
                continue
            text = f"{point['median']:.1f}" + (f" ({point['p25']:.1f}–{point['p75']:.1f})" if several else "")
            row.append(f"**{text}**" if round(point["median"], 1) == lowest else text)
        rows.append(row)
    return ["GPUs arrived"] + names, rows


def is_fill(document: dict[str, Any]) -> bool:
    return "fill" in document["run"]


def _window_note(document: dict[str, Any]) -> str:
    """Which figures the measurement window bounds: in fill mode only the summary's frag (FGD);
    the fill plots and tables count every pod, so the note must not claim them for the window."""
    window = document["run"]["window"]["text"]
    if is_fill(document):
        return (f"Measurement window: {window}. In fill mode only frag (FGD) in the summary is over this "
                "window (set by the first seed's pods); the fill plots, the tables and the pods placed and dropped "
                "count every pod.")
    return f"Measurement window: {window}. Every figure below is over this window unless it says otherwise."


def _fill_note(document: dict[str, Any]) -> str:
    fill = document["run"]["fill"]
    pods = ", ".join(f"seed {seed}: {n:,}" for seed, n in fill["pods_by_seed"].items())
    return (f"openb fill mode (the FGD paper's method): pods shuffled by seed and topped up by drawing again until "
            f"they ask {fill['inflate']:g} × the {fill['capacity_gpus']:,} GPUs; each tried once at its arrival "
            f"(dropped when it cannot be placed), none leaving. Pods per seed: {pods}. Unallocated = 100 − "
            "allocated % of capacity, after the last pod whose arrival kept the GPUs arrived at or below that %. "
            + ("Cells: unallocated GPU %, the median over the seeds (25th–75th percentile); in bold a row's "
               "lowest median where one selector alone has it. " if len(fill["pods_by_seed"]) > 1 else
               "Cells: unallocated GPU %; in bold a row's lowest where one selector alone has it. ")
            + "Every 1 % is in metrics.json (unallocated_gpu_pct_at_arrived).")


def _sweep_rows(document: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["nodes", "GPUs", "selector", "JCT mean (s)", "JCT p95 (s)", "queue mean (s)", "allocation",
              "frag (HOL)", "unfinished"]
    rows = []
    for point in document["sweep"]["points"]:
        for name, f in point["selectors"].items():
            rows.append([f"{point['nodes']:,}", f"{point['gpus']:,}", name, cell("jct_mean_s", f["jct_mean_s"]),
                         cell("jct_p95_s", f["jct_p95_s"]), cell("queue_mean_s", f["queue_mean_s"]),
                         cell("gpu_allocation_mean", f["gpu_allocation_mean"]),
                         cell("frag_hol_mean", f["frag_hol_mean"]), cell("unfinished", f["unfinished"])])
    return header, rows


def identity_lines(document: dict[str, Any]) -> list[tuple[str, str]]:
    run = document["run"]
    source = run["input"]
    cluster = run["cluster"]
    lines = [
        ("trace", _fill_trace(document) if is_fill(document) else
                  f"{source['source']} ({source['format']}, {source['jobs']:,} jobs"
                  + (f", from {source['origin']}" if source["origin"] else "")
                  + (f", submitted in {source['submit_window']}" if source["submit_window"] else "") + ")"),
        ("trace sha256", source["sha256"]),
        *((("read as", source["reading"]),) if source.get("reading") else ()),
        ("cluster", f"{cluster['name']}: {cluster['nodes']:,} nodes, {cluster['gpus']:,} GPUs"
                    + (f", isolated queues {', '.join(cluster['isolated_queues'])}" if cluster["isolated_queues"]
                       else "")),
        ("measurement window", run["window"]["text"]),
        ("queue policy", f"{run['queue_policy']}; heartbeat {run['heartbeat_s']:g} s; "
                         f"arrivals × {run['time_scale']:g}"),
        ("seeds", ", ".join(map(str, run["seeds"]))
                  + (" (figures: median across seeds)" if len(run["seeds"]) > 1 else "")),
    ]
    if cluster["source"]:
        lines.insert(3, ("cluster source", cluster["source"]))
    first_seed = f"seed {run['seeds'][0]}"   # a seeded rule is told as the first seed's
    seed_note = f" (as for {first_seed}; each seed draws its own order)" if len(run["seeds"]) > 1 else ""
    lines += [("tie rule", f"{', '.join(names)}: {rule}" + (seed_note if first_seed in rule else ""))
              for rule, names in tie_rule_groups(run["tie_rules"]).items()]
    lines.append(("gangmaster", run["version"]))
    return lines


def _fill_trace(document: dict[str, Any]) -> str:
    """Fill mode's trace line: the pods in the file and the pods each seed replayed (the file
    shuffled, cut or topped up by drawing again until they ask --inflate × the GPUs)."""
    source, fill = document["run"]["input"], document["run"]["fill"]
    replayed = sorted(fill["pods_by_seed"].values())
    count = f"{replayed[0]:,}" + (f"–{replayed[-1]:,}" if replayed[-1] != replayed[0] else "")
    per_seed = " per seed" if len(fill["pods_by_seed"]) > 1 else ""
    return (f"{source['source']} ({source['format']}, {source['jobs']:,} pods in the file; {count} pods replayed"
            f"{per_seed}: shuffled, cut or topped up by drawing again until they ask {fill['inflate']:g} × the GPUs)")


def not_drawn(skipped: Iterable[tuple[str, str]]) -> list[str]:
    """"FILES: why" for the figures not drawn, one line per reason (four figures left out
    for one reason make one line, not four)."""
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped:
        by_reason.setdefault(why, []).append(name)
    return [f"{', '.join(names)}: {why}" for why, names in by_reason.items()]


def tie_rule_groups(tie_rules: dict[str, str]) -> dict[str, list[str]]:
    """The selectors by tie rule (each rule text starts with its selector's name): one
    line per rule, not one per selector, which reads the same five times over."""
    groups: dict[str, list[str]] = {}
    for name, rule in tie_rules.items():
        text = rule[len(name) + 2:] if rule.startswith(f"{name}: ") else rule
        groups.setdefault(text, []).append(name)
    return groups


# ------------------------------------------------------------------ HTML

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1150px;
       color: #1d1d1f; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 8px 0 16px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d5; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f2f2f5; font-weight: 600; } td:first-child, th:first-child, td.text { text-align: left; }
table.identity td { text-align: left; white-space: normal; } table.identity td:first-child { color: #555; width: 170px; }
table.wide { display: block; overflow-x: auto; max-width: 100%; }
figure { margin: 12px 0 24px; } figure img { max-width: 100%; border: 1px solid #e3e3e8; }
figcaption { color: #555; font-size: 13px; } dt { font-weight: 600; margin-top: 6px; } dd { margin-left: 18px; }
.note { color: #666; font-size: 13px; }
"""


def _html_cell(text: str) -> str:
    """Numbers right-aligned (the default), words left-aligned; ``**text**`` (Markdown's
    bold, as :func:`fill_rows` marks the lowest) in bold."""
    bold = len(text) > 4 and text.startswith("**") and text.endswith("**")
    text = text[2:-2] if bold else text
    numeric = text[:1].isdigit() or text[:1] in "–-+"
    shown = f"<strong>{html.escape(text)}</strong>" if bold else html.escape(text)
    return f"<td>{shown}</td>" if numeric else f"<td class=\"text\">{shown}</td>"


def html_table(header: list[str], rows: list[list[str]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>\n" for row in rows)
    cls = f' class="{css}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>\n"


def _html_figure(folder: Path, drawn: Drawn) -> str:
    """A figure embedded in the page (the PNG as a data URL: one self-contained file), its
    caption under it."""
    data = base64.b64encode((folder / drawn.name).read_bytes()).decode("ascii")
    return (f"<figure><img alt=\"{html.escape(drawn.figure.title)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{html.escape(drawn.caption)} ({' and '.join(drawn.figure.files)})</figcaption></figure>")


def _md_figure(drawn: Drawn) -> str:
    png, pdf = drawn.figure.files
    return f"![{drawn.figure.title}]({png})\n\n*{drawn.caption}* ([PDF]({pdf}))\n"


def render_html(document: dict[str, Any], folder: Path, figures: list[Drawn], skipped: list[tuple[Any, str]]) -> str:
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<title>gangmaster replay report</title>", f"<style>{STYLE}</style></head><body>",
             "<h1>gangmaster replay: placement policies compared</h1>",
             f"<p class=\"note\">{html.escape(_window_note(document))}</p>"]
    identity = [[k, v] for k, v in identity_lines(document)]
    parts.append(html_table(["", ""], identity, "identity").replace("<thead><tr><th></th><th></th></tr></thead>", ""))
    headline = [f for f in figures if f.name == FILL_FIGURE]   # drawn in fill mode only
    if is_fill(document):   # the headline: its plot first, then the table
        parts.append("<h2>Unallocated GPUs against GPUs arrived (fill mode)</h2>")
        parts += [_html_figure(folder, f) for f in headline]
        parts.append(f"<p class=\"note\">{html.escape(_fill_note(document))}</p>")
        parts.append(html_table(*fill_rows(document, mark_lowest=True)))
    parts.append("<h2>Summary</h2>")
    parts.append(html_table(*summary_rows(document)))
    if "sweep" in document:
        parts.append("<h2>Load sweep</h2>")
        parts.append(html_table(*_sweep_rows(document)))
    parts.append("<h2>Figures</h2>")
    parts += [_html_figure(folder, f) for f in figures if f not in headline]
    if skipped:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in not_drawn((f.name, why) for f, why in skipped))
        parts.append(f"<p class=\"note\">Not drawn:</p><ul class=\"note\">{items}</ul>")
    parts.append("<h2>By queue</h2>")
    if is_fill(document):
        parts.append(f"<p class=\"note\">{html.escape(FILL_GROUP_NOTE)}</p>")
    parts.append(html_table(*group_rows(document, "by_queue")))
    parts.append("<h2>By gang size (GPUs)</h2>")
    parts.append(html_table(*group_rows(document, "by_gang_size")))
    parts.append("<h2>What each figure means</h2><dl>")
    for name, unit, meaning in meanings(document):
        parts.append(f"<dt>{html.escape(name)}{' (' + unit + ')' if unit else ''}</dt>"
                     f"<dd>{html.escape(meaning)}</dd>")
    parts.append("</dl><p class=\"note\">Definitions: REPLAY.md. Files beside this page: metrics.json, jobs.csv, "
                 "timeline.csv, report.md and the figures as PNG and PDF.</p></body></html>\n")
    return "\n".join(parts)


# ------------------------------------------------------------------ Markdown

def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " if i == 0 else " ---: " for i in
                                                                 range(len(header))) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_markdown(document: dict[str, Any], figures: list[Drawn], skipped: list[tuple[Any, str]]) -> str:
    parts = ["# gangmaster replay: placement policies compared\n"]
    parts += [f"- **{k}**: {v}" for k, v in identity_lines(document)]
    parts.append(f"\n{_window_note(document)}\n")
    headline = [f for f in figures if f.name == FILL_FIGURE]   # drawn in fill mode only
    if is_fill(document):   # the headline: its plot first, then the table
        parts.append("## Unallocated GPUs against GPUs arrived (fill mode)\n")
        parts += [_md_figure(f) for f in headline]
        parts.append(_fill_note(document) + "\n")
        parts.append(md_table(*fill_rows(document, mark_lowest=True)))
    parts.append("## Summary\n")
    parts.append(md_table(*summary_rows(document)))
    if "sweep" in document:
        parts.append("## Load sweep\n")
        parts.append(md_table(*_sweep_rows(document)))
    parts.append("## Figures\n")
    parts += [_md_figure(f) for f in figures if f not in headline]
    parts += [f"- not drawn: {line}" for line in not_drawn((f.name, why) for f, why in skipped)]
    parts.append("\n## By queue\n")
    if is_fill(document):
        parts.append(FILL_GROUP_NOTE + "\n")
    parts.append(md_table(*group_rows(document, "by_queue")))
    parts.append("## By gang size (GPUs)\n")
    parts.append(md_table(*group_rows(document, "by_gang_size")))
    parts.append("## What each figure means\n")
    parts += [f"- **{name}**{' (' + unit + ')' if unit else ''}: {meaning}"
              for name, unit, meaning in meanings(document)]
    return "\n".join(parts) + "\n"
