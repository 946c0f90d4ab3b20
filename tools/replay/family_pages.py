"""The family report of ``gangmaster replay --workloads DIR`` (:mod:`.family`): one folder
with ``family.json`` (:func:`~.family.family_document`), ``family.csv`` (a row per workload
and policy), ``report.html`` (self-contained, the replay report's style) and ``report.md``
(the same tables), written the way a replay report is (:func:`~.report.write_folder`:
whole, or marked INCOMPLETE).

The headline table: a row per workload, a column per policy, each cell our median
unallocated GPU % at 100 % arrived and, after a slash, the artifact's figure for the paper's
counterpart of that policy (when ``--expected`` was given); then the best of our policies on
that workload and its margin over the paper's FGD and over our ``fgd`` (> 0: fewer GPUs left
unallocated). Then each policy's decision time per pod, measured in the same run.
"""
from __future__ import annotations

import csv
import html
import json
from pathlib import Path
from typing import Any

from .family import ARRIVED_PCT, OUR_FGD, PAPER_FGD_PORT, REPLAYS_FILE
from .pages import STYLE, html_table, md_table
from .report import INCOMPLETE, ReportFiles, write_folder

FAMILY_FILES = ("family.json", "family.csv", "report.html", "report.md", INCOMPLETE)
CSV_COLUMNS = ("workload", "selector", "seeds", "unallocated_pct_median", "unallocated_pct_p25",
               "unallocated_pct_p75", "paper_policy", "artifact_median", "artifact_seeds", "vs_artifact_pp",
               "vs_paper_fgd_pp", "dropped_median", "us_per_decision")


def write_family_report(document: dict[str, Any], folder: str | Path) -> ReportFiles:
    return write_folder(folder, lambda partial: _write(document, partial), FAMILY_FILES)


def _write(document: dict[str, Any], folder: Path) -> tuple[tuple[str, ...], list]:
    (folder / "family.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    write_family_csv(document, folder / "family.csv")
    (folder / "report.html").write_text(render_html(document), encoding="utf-8")
    (folder / "report.md").write_text(render_markdown(document), encoding="utf-8")
    return FAMILY_FILES[:-1], []


def write_family_csv(document: dict[str, Any], path: Path) -> None:
    seeds = " ".join(map(str, document["run"]["seeds"]))
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for workload, entry in document["workloads"].items():
            for name, figures in entry["selectors"].items():
                spread, artifact = figures["unallocated_pct"], figures["artifact"] or {}
                out.writerow([workload, name, seeds, *_blank(spread["median"], spread["p25"], spread["p75"]),
                              artifact.get("policy", ""), *_blank(artifact.get("median")),
                              " ".join(map(str, artifact.get("seeds", ()))),
                              *_blank(figures["vs_artifact_pp"], figures["vs_paper_fgd_pp"], figures["dropped"],
                                      figures["us_per_decision"])])


def _blank(*values) -> list:
    return ["" if v is None else v for v in values]


# ------------------------------------------------------------------ tables

def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _pp(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def headline_rows(document: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A row per workload: each policy's median (``ours / artifact`` where the artifact has
    the paper's counterpart), the lowest of ours in ``**``, then the best policy and its
    margins (pp; > 0: it leaves fewer GPUs unallocated than FGD)."""
    names = document["run"]["selectors"]
    expected = document["run"]["expected"] is not None
    header = ["workload", *names, "best", *(["best vs paper FGD (pp)"] if expected else []),
              f"best vs our {OUR_FGD} (pp)"]
    rows = []
    for workload, entry in document["workloads"].items():
        best = entry["best"] or {}
        row = [workload]
        for name in names:
            figures = entry["selectors"][name]
            text = _pct(figures["unallocated_pct"]["median"])
            if figures["artifact"]:
                text += f" / {_pct(figures['artifact']['median'])}"
            row.append(f"**{text}**" if name == best.get("selector") else text)
        row.append(best.get("selector", "–"))
        if expected:
            row.append(_pp(best.get("margin_over_paper_fgd_pp")))
        row.append(_pp(best.get("margin_over_fgd_pp")))
        rows.append(row)
    return header, rows


def decision_rows(document: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Each policy's decision time per pod over the whole run, and against the paper's FGD's
    (as its plugin scores: ``fgd-k8s``) and our ``fgd``'s, where they ran."""
    decisions = document["decision_us_per_pod"]
    bases = [name for name in (PAPER_FGD_PORT, OUR_FGD) if (decisions.get(name) or {}).get("us_per_decision")]
    rows = []
    for name, d in decisions.items():
        us = d["us_per_decision"]
        rows.append([name, "–" if us is None else f"{us:,.0f}",
                     *(f"{us / decisions[base]['us_per_decision']:.2f}×" if us is not None else "–" for base in bases),
                     f"{d['decisions']:,}", f"{d['replay_wall_s']:,.0f}"])
    return ["policy", "µs per decision", *(f"× {base}" for base in bases), "decisions", "replay wall (s)"], rows


def identity_lines(document: dict[str, Any]) -> list[tuple[str, str]]:
    run = document["run"]
    cluster = run["cluster"]
    papers = ", ".join(f"{name} ↔ {policy}" for name, policy in run["paper_policy"].items() if policy)
    return [("workloads", f"{run['workloads']}: {len(document['workloads'])} pod lists"),
            ("cluster", f"{cluster['name']}: {cluster['nodes']:,} nodes, {cluster['gpus']:,} GPUs "
                        f"({run['nodes_file']})"),
            ("fill", f"--inflate {run['inflate']:g}; each seed's pods shuffled and topped up the paper's way, "
                     "one arrival per second, a pod that does not fit at its arrival dropped; "
                     + ("the artifact's own draws (--draws artifact: its pod order and renamed nodes, seed by seed)"
                        if run.get("draws") == "artifact" else "Python's draws (--draws python)")),
            ("seeds", ", ".join(map(str, run["seeds"])) + " (cells: the median over them)"),
            ("artifact", run["expected"] or "not given (--expected DIR)"),
            *((("paper counterparts", papers),) if papers else ()),
            ("processes", f"{run['processes']} (wall {run['wall_s']:,.0f} s)"
                          + (f"; {run['resumed']:,} of the replays resumed from {REPLAYS_FILE} (an earlier run's: "
                             "their decision times measured then)" if run.get("resumed") else "")),
            ("gangmaster", run["version"])]


def _note(document: dict[str, Any]) -> str:
    expected = document["run"]["expected"] is not None
    beats = document["beat_paper_fgd_everywhere"]
    return (f"Cells: unallocated GPU % at {ARRIVED_PCT} % of the GPUs arrived, the median over the seeds"
            + (" / the artifact's median for the paper's counterpart over the same seeds" if expected else "")
            + "; in bold the best of ours on the workload. Margins in percentage points, > 0 where the best "
              "leaves fewer GPUs unallocated than FGD."
            + ((" Below the paper's FGD on every workload: " + (", ".join(beats) if beats else "none") + ".")
               if expected else ""))


# ------------------------------------------------------------------ pages

TITLE = "gangmaster replay: a workload family compared"


def render_html(document: dict[str, Any]) -> str:
    identity = html_table(["", ""], [[k, v] for k, v in identity_lines(document)], "identity").replace(
        "<thead><tr><th></th><th></th></tr></thead>", "")
    return "\n".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">", f"<title>{TITLE}</title>",
        f"<style>{STYLE}</style></head><body>", f"<h1>{TITLE}</h1>", identity,
        f"<h2>Unallocated GPUs at {ARRIVED_PCT} % arrived, per workload</h2>",
        f"<p class=\"note\">{html.escape(_note(document))}</p>", html_table(*headline_rows(document), "wide"),
        "<h2>Decision time per pod</h2>",
        "<p class=\"note\">The select() calls each replay timed (one per pod placed or tried), every policy in the "
        "same run: total time / calls.</p>", html_table(*decision_rows(document)),
        "<p class=\"note\">Files beside this page: family.json, family.csv, report.md.</p></body></html>\n"])


def render_markdown(document: dict[str, Any]) -> str:
    return "\n".join([f"# {TITLE}\n", *(f"- **{k}**: {v}" for k, v in identity_lines(document)),
                      f"\n## Unallocated GPUs at {ARRIVED_PCT} % arrived, per workload\n", _note(document) + "\n",
                      md_table(*headline_rows(document)), "## Decision time per pod\n",
                      md_table(*decision_rows(document))]) + "\n"
