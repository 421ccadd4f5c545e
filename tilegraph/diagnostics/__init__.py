"""Diagnostics: progress bars, the HTML run report, built on the executor's event stream."""

from tilegraph.diagnostics.progress import ProgressBar, progress_wanted
from tilegraph.diagnostics.report import Recorder, write_report

__all__ = ["ProgressBar", "Recorder", "progress_wanted", "write_report"]
