"""The HTML report of a run, rendered from recordings: the task stream, memory over time,
the processes and the plan.

:func:`write_report` turns the recordings of every process of the run (the
:meth:`~tilegraph.diagnostics.recorder.Recorder.data` of one recorder on a single machine, one
per rank under MPI) into one self-contained HTML file with inline SVG charts and no external
resources::

    rec = Recorder()
    x.compute(callbacks=[rec])
    write_report("run.html", [rec.data()], summary=x.explain())

Under MPI every rank records its own events and rank 0 writes the report::

    recordings = comm.gather(rec.data(), root=0)
    if comm.rank == 0:
        write_report("run.html", recordings)

Times are seconds since the earliest start of a run among the processes. Processes on one
machine share its monotonic clock (``time.perf_counter``); when the recordings come from
several machines, each process's clock is aligned on the wall-clock time of its start.

:class:`~tilegraph.diagnostics.recorder.Recorder` is importable from here too, beside the
function that reads what it records. This module holds the page (its sections, the table of
processes, the atomic write); the recordings are read in
:mod:`~tilegraph.diagnostics.recordings`, the charts drawn in
:mod:`~tilegraph.diagnostics.charts` with the layout, colours and time axis of
:mod:`~tilegraph.diagnostics.drawing`.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator
from html import escape
from typing import Any

from tilegraph.diagnostics.charts import (  # noqa: F401 - re-exported
    MAX_MEMORY_POINTS,
    memory_chart,
    pool_chart,
    task_stream,
)
from tilegraph.diagnostics.drawing import (  # noqa: F401 - re-exported
    KIND_COLOURS,
    NO_KIND_COLOUR,
    OTHER_KIND_COLOURS,
    RANK_COLOURS,
    Scale,
    duration,
    kind_colour,
    rank_colour,
)
from tilegraph.diagnostics.recorder import Recorder
from tilegraph.diagnostics.recordings import (
    ProcessRecord,
    read_processes,
    time_scale,
    validate_recordings,
)
from tilegraph.util import human

__all__ = ["Recorder", "kind_colour", "rank_colour", "write_report"]


#: Above this many tasks in a report, tasks closer than a pixel on a worker's row are drawn
#: as one rect, so that the file stays a few MB however long the run.
MERGE_ABOVE = 20_000


# -- tables and page ---------------------------------------------------------------------------


def _process_table(procs: list[ProcessRecord]) -> Iterator[str]:
    """Per process: tasks run, busy seconds per worker, bytes received, peak held."""
    multi = len(procs) > 1
    yield "<section><h2>Processes</h2>\n<table><thead><tr>"
    heads = (["rank", "host"] if multi else []) + [
        "backend", "status", "tasks run", "failed attempts", "run time",
        "busy per worker", "received by transfer", "peak held"]
    yield "".join(f"<th>{escape(h)}</th>" for h in heads)
    yield "</tr></thead><tbody>\n"
    for p in procs:
        busy: dict[int, float] = defaultdict(float)
        for t in p.tasks:
            busy[t[0]] += t[2] - t[1]
        run = p.stop - p.start if p.stop is not None and p.start is not None else None
        per_worker = ", ".join(
            f"{w}: {duration(busy[w])}" + (f" ({100 * busy[w] / run:.0f}%)" if run else "")
            for w in sorted(set(range(p.nworkers)) | set(busy)))
        received = sum(t[3] for t in p.transfers)
        peak = (p.end or {}).get("peak_bytes") or max((h for _, h in p.memory), default=0)
        cells = ([str(p.rank), p.host] if multi else []) + [
            p.backend or "?", str((p.end or {}).get("status", "?")), str(len(p.tasks)),
            str(p.failures), "?" if run is None else duration(run), per_worker or "-",
            f"{human(received)} in {len(p.transfers)}" if p.transfers else "-", human(peak)]
        yield "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>\n"
    yield "</tbody></table>\n</section>\n"


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
svg { max-width: 100%; height: auto; display: block; }
svg text { font: 11px sans-serif; fill: #333; } svg text.small { font-size: 9px; }
.legend { list-style: none; padding: 0; margin: 0.3em 0; }
.legend li { display: inline-block; margin-right: 1.2em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em;
          vertical-align: middle; }
.n, .note, .meta { color: #666; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
"""


def _page(procs: list[ProcessRecord], scale: Scale, title: str,
          summary: str | None) -> Iterator[str]:
    ntasks = sum(len(p.tasks) for p in procs)
    merge = ntasks > MERGE_ABOVE or sum(len(p.transfers) for p in procs) > MERGE_ABOVE
    statuses = sorted({str(p.end.get("status")) for p in procs if p.end})
    yield ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
           f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
           f"<h1>{escape(title)}</h1>\n")
    nworkers = sum(p.nworkers for p in procs)
    meta = (f"{ntasks} tasks on {len(procs)} process{'es' if len(procs) > 1 else ''}"
            f" ({nworkers} workers), {duration(scale.hi - max(scale.lo, 0.0))}"
            + (f"; status: {', '.join(statuses)}" if statuses else ""))
    yield f'<p class="meta">{escape(meta)}</p>\n'
    yield from task_stream(procs, scale, merge)
    yield from memory_chart(procs, scale)
    yield from pool_chart(procs, scale)
    yield from _process_table(procs)
    if summary is not None:
        yield f"<section><h2>Plan</h2>\n<pre>{escape(summary)}</pre>\n</section>\n"
    yield "</body>\n</html>\n"


def _write_atomically(path: pathlib.Path, parts: Iterable[str]) -> None:
    """Write ``parts`` to a new file beside ``path``, then move it into place: ``path`` is
    either left as it was or replaced whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_report(path: str | os.PathLike[str], recordings: list[dict[str, Any]], *,
                 title: str = "tilegraph run", summary: str | None = None) -> pathlib.Path:
    """Write the HTML report of one run from the :meth:`Recorder.data` of the recorder of
    every process (one dict per process; each one's rank is that of its ``RunStart``).

    ``summary`` is the plan summary text (e.g. the output of ``explain()``), shown as it
    is. The file is self-contained (inline SVG and CSS) and written atomically: a failure
    leaves any earlier file at ``path`` as it was. Returns the path written.

    Raises ``ValueError`` if ``recordings`` is not a non-empty list of such dicts (one per
    rank), ``FileNotFoundError`` if the directory of ``path`` does not exist.
    """
    recs = validate_recordings(recordings)
    if summary is not None and not isinstance(summary, str):
        raise TypeError(f"summary must be a str, got {type(summary).__name__}")
    path = pathlib.Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write the report {str(path)!r}: its directory "
                                f"{str(path.parent)!r} does not exist")
    procs = read_processes(recs)
    _write_atomically(path, _page(procs, time_scale(procs), str(title), summary))
    return path
