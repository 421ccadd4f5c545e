"""Diagnostics: progress bars and event logs, built on the executor's event stream."""

from tilegraph.diagnostics.progress import ProgressBar, progress_wanted

__all__ = ["ProgressBar", "progress_wanted"]
