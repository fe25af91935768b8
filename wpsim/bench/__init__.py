"""Benchmark suites behind ``wpsim bench`` (records as JSON; see ``wpsim.bench.records``)."""

from wpsim.bench.records import METRIC_UNITS, format_table, record
from wpsim.bench.scene_speed import count_launches
from wpsim.bench.suites import DEFAULT_SUITES, SUITES, run_suites

__all__ = ["DEFAULT_SUITES", "METRIC_UNITS", "SUITES", "count_launches", "format_table", "record", "run_suites"]
