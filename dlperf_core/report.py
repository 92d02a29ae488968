"""Kept for old imports: the seed tables now live in :mod:`dlperf_core.reporting.tables`."""

from dlperf_core.reporting.tables import markdown_table, seed_tables

__all__ = ["markdown_table", "seed_tables"]
