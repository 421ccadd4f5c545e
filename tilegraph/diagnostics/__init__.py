"""Diagnostics: progress bars, the recording of a run and its HTML report, built on the
executor's event stream. They import from tilegraph only :mod:`tilegraph.runtime.events` and
:mod:`tilegraph.util`. The recorder and the report are loaded when first used (a run that
writes no report does not pay for importing them)."""

from typing import Any

from tilegraph.diagnostics.progress import ProgressBar, progress_wanted

__all__ = ["ProgressBar", "Recorder", "progress_wanted", "write_report"]


def __getattr__(name: str) -> Any:
    if name == "Recorder":
        from tilegraph.diagnostics.recorder import Recorder

        return Recorder
    if name == "write_report":
        from tilegraph.diagnostics.report import write_report

        return write_report
    raise AttributeError(f"module 'tilegraph.diagnostics' has no attribute {name!r}")
