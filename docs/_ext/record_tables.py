"""Sphinx directives that write tables from the benchmark records of ``benchmarks/records/``
(the JSON lists that ``wpsim bench --json`` writes), so that the guides' figures are read
from the records, never typed by hand: ``versus-table`` (wpsim against a baseline) and
``record-table`` (one metric by the params of each record).

    ```{versus-table} cpu_2026-12-06/vs_mujoco_stance.json
    :metric: world_steps_per_s
    :ours: wpsim_stance_worlds
    :theirs: mujoco_rollout vs wpsim_stance
    :baseline: MuJoCo rollout
    ```

One row per case and world count holding both sides' value of ``metric`` (records whose
``params.mode`` is ``ours`` and ``theirs``), and wpsim's speed over the baseline's: the
rate ratio for a rate (``*_per_s``), the inverse time ratio for a time (``*_s``).
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives

RECORDS = Path(__file__).resolve().parents[2] / "benchmarks" / "records"
UNITS = {"steps_per_s": "steps/s", "world_steps_per_s": "world-steps/s", "wall_s": "s"}


def versus_rows(records: list, metric: str, ours: str, theirs: str) -> list:
    """(case, worlds, ours value, theirs value, wpsim speed / baseline speed) for every case
    and world count that both sides measured, in the record's order."""
    def values(mode):
        return {(r["case"], r["params"].get("worlds", 1)): float(r["value"]) for r in records
                if r["metric"] == metric and r["params"].get("mode") == mode}

    mine, base = values(ours), values(theirs)
    if not mine:
        raise ValueError(f"no record with metric {metric!r} and mode {ours!r}")
    is_rate = metric.endswith("_per_s")
    return [(case, worlds, value, base[case, worlds], value / base[case, worlds] if is_rate else base[case, worlds] / value)
            for (case, worlds), value in mine.items() if (case, worlds) in base]


def number(value: float) -> str:
    """A figure as the guides print it: thousands separated, three significant digits below 100."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def table_node(header: list, rows: list) -> nodes.table:
    """A docutils table of text cells."""
    table, group = nodes.table(), nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]
    for part, lines in ((nodes.thead(), [header]), (nodes.tbody(), rows)):
        group += part
        for line in lines:
            row = nodes.row()
            for text in line:
                row += nodes.entry("", nodes.paragraph(text=str(text)))
            part += row
    return table


class VersusTable(Directive):
    """``versus-table RECORD``: wpsim against a baseline, from one benchmark record."""

    required_arguments = 1
    option_spec = {"metric": directives.unchanged_required, "ours": directives.unchanged_required,
                   "theirs": directives.unchanged_required, "baseline": directives.unchanged_required}

    def run(self):
        path = RECORDS / self.arguments[0]
        self.state.document.settings.record_dependencies.add(str(path))
        try:
            rows = versus_rows(json.loads(path.read_text()), self.options["metric"], self.options["ours"],
                               self.options["theirs"])
        except (OSError, ValueError, KeyError) as error:
            raise self.error(f"versus-table {self.arguments[0]}: {error}") from error
        unit = UNITS.get(self.options["metric"], self.options["metric"])
        baseline = self.options["baseline"]
        header = ["case", "worlds", f"wpsim ({unit})", f"{baseline} ({unit})", f"wpsim speed / {baseline}"]
        body = [[case, worlds, number(a), number(b), f"{ratio:.2f}x"] for case, worlds, a, b, ratio in rows]
        return [table_node(header, body)]


def record_rows(records: list, metric: str, columns: list) -> list:
    """(the ``columns`` of params (or the record's ``case``)..., value) of every record of
    ``metric``, in order."""
    rows = [[r["case"] if c == "case" else r["params"].get(c, "") for c in columns] + [float(r["value"])]
            for r in records if r["metric"] == metric]
    if not rows:
        raise ValueError(f"no record with metric {metric!r}")
    return rows


class RecordTable(Directive):
    """``record-table RECORD``: one metric of a benchmark record, a row per record, with
    the ``params`` named by ``:columns:`` (comma-separated; ``case``: the record's case) before
    the value."""

    required_arguments = 1
    option_spec = {"metric": directives.unchanged_required, "columns": directives.unchanged_required,
                   "header": directives.unchanged_required}

    def run(self):
        path = RECORDS / self.arguments[0]
        self.state.document.settings.record_dependencies.add(str(path))
        columns = [c.strip() for c in self.options["columns"].split(",")]
        try:
            rows = record_rows(json.loads(path.read_text()), self.options["metric"], columns)
        except (OSError, ValueError, KeyError) as error:
            raise self.error(f"record-table {self.arguments[0]}: {error}") from error
        header = [c.replace("_", " ") for c in columns] + [self.options["header"]]
        return [table_node(header, [[*row[:-1], f"{row[-1]:.3g}"] for row in rows])]


def setup(app):
    """Register the directives."""
    app.add_directive("versus-table", VersusTable)
    app.add_directive("record-table", RecordTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
