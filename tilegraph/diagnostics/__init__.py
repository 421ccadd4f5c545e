"""Diagnostics: progress bars, the recording of a run and its HTML report, built on the
executor's event stream. They import from tilegraph only :mod:`tilegraph.runtime.events` and
:mod:`tilegraph.util`."""

from tilegraph.diagnostics.progress import ProgressBar, progress_wanted
from tilegraph.diagnostics.recorder import Recorder
from tilegraph.diagnostics.report import write_report

__all__ = ["ProgressBar", "Recorder", "progress_wanted", "write_report"]
