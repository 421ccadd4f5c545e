"""Public dask and xarray programs, ported by changing the import, run on dask and on
tilegraph, compared.

Each ``bench/ports/<name>.py`` is one public program (its source named in its docstring and
``SOURCE``), written for dask: ``import dask.array as da``, or for xarray with the line
``xr.set_options(chunk_manager="dask")`` (dask is xarray's default: the line changes
nothing there). Where the program downloads data, ``inputs(scale)`` makes synthetic data
of the same shapes and chunking with NumPy (seeded, so both runs see the same numbers);
``program(inputs)`` is the program, returning its results by name. The tilegraph variant is
the same source with the switch line replaced (``import tilegraph as da``,
``chunk_manager="tilegraph"``), and nothing else; a port that cannot run so lists the
further line edits it needs in ``TILEGRAPH_EDITS`` (``[(old, new), ...]``, with ``WHY``).

For each port this runs both variants, each in a fresh interpreter with the same number of
worker threads (dask's threaded scheduler with ``num_workers``, its BLAS threads limited to
cores / workers as tilegraph limits its own; tilegraph's ``workers``), and reports:

- **unchanged**: ``y`` if the tilegraph variant ran with only the switch line changed; ``n``
  with the error it met otherwise (``needs parity: <name>`` when tilegraph lacks a name of
  dask.array's), and then the edited variant (``TILEGRAPH_EDITS``) is what runs;
- **matched**: ``y`` if every result equals dask's (same shape, ``allclose`` within the
  port's ``RTOL``, NaNs in the same places);
- **time**: tilegraph's time of ``program`` over dask's (best of ``--repeat`` runs; input
  making not timed).

Run: ``python bench/ports/run.py [--scale 1.0] [--workers 2] [--repeat 3] [--only a,b]
[--json out.json]``. ``--scale`` multiplies the leading sizes (``0.05`` runs every port in
seconds, for checking matches only: ``tests/bench/test_ports.py`` does that). Take timings
only on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# the switch line of each front end: dask's form -> tilegraph's
SWITCHES = {
    "import dask.array as da": "import tilegraph as da",
    'xr.set_options(chunk_manager="dask")': 'xr.set_options(chunk_manager="tilegraph")',
}


def ports() -> list[str]:
    """The names of the ports (the modules of this directory but the driver)."""
    return sorted(f[:-3] for f in os.listdir(HERE)
                  if f.endswith(".py") and f != "run.py" and not f.startswith("_"))


def variant_source(source: str, which: str, edits: list | None = None) -> str:
    """The port's source for ``which`` ("dask" or "tilegraph"): tilegraph's replaces the
    switch lines (and, given, the lines of ``edits``); a port with no switch line is an
    error."""
    if which == "dask":
        return source
    lines = source.splitlines(keepends=True)
    switched = 0
    for n, line in enumerate(lines):
        stripped = line.strip()
        if stripped in SWITCHES:
            lines[n] = line.replace(stripped, SWITCHES[stripped])
            switched += 1
    if not switched:
        raise ValueError(f"no switch line ({' or '.join(SWITCHES)}) in the port")
    out = "".join(lines)
    for old, new in edits or []:
        if old not in out:
            raise ValueError(f"TILEGRAPH_EDITS: {old!r} is not in the port")
        out = out.replace(old, new)
    return out


def _declared(source: str, name: str) -> Any:
    """A module-level literal of the port (``TILEGRAPH_EDITS``, ``RTOL``, ``WHY``) read
    without running it."""
    import ast

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def _plain(value: Any) -> Any:
    """A result as NumPy data (xarray objects by their values; tuples and dicts item by
    item)."""
    import numpy as np

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if hasattr(value, "to_dataset") or hasattr(value, "data_vars"):  # xarray
        if hasattr(value, "data_vars"):
            return {k: _plain(v) for k, v in value.data_vars.items()}
        return np.asarray(value.values)
    if hasattr(value, "compute") and not isinstance(value, np.ndarray):
        raise TypeError(f"a result is still lazy ({type(value).__name__}): a port returns "
                        "computed values")
    return np.asarray(value)


def child(name: str, which: str, scale: float, workers: int, repeat: int, out: str,
          edited: bool) -> None:
    """Run one variant of one port in this interpreter; write its results and times."""
    path = os.path.join(HERE, f"{name}.py")
    with open(path) as f:
        source = f.read()
    edits = _declared(source, "TILEGRAPH_EDITS") if edited else None
    code = compile(variant_source(source, which, edits), path, "exec")
    record: dict[str, Any] = {"ok": False}
    try:
        if which == "dask":
            import dask
            from threadpoolctl import threadpool_limits

            dask.config.set(scheduler="threads", num_workers=workers)
            threadpool_limits(max(1, (os.cpu_count() or 1) // workers))
        else:
            import tilegraph

            tilegraph.config.set(workers=workers).__enter__()
        module: dict[str, Any] = {"__name__": f"port_{name}", "__file__": path}
        exec(code, module)
        times = []
        results = None
        for _ in range(repeat):
            inputs = module["inputs"](scale)
            t0 = time.perf_counter()
            results = module["program"](inputs)
            times.append(time.perf_counter() - t0)
        record = {"ok": True, "results": _plain(results), "time": min(times)}
    except BaseException as exc:  # reported, not raised: the parent prints it
        record = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc(limit=-6)}
    with open(out, "wb") as f:
        pickle.dump(record, f)


def _run_child(name: str, which: str, args: argparse.Namespace, edited: bool = False
               ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.pkl")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--variant",
               which, "--scale", str(args.scale), "--workers", str(args.workers),
               "--repeat", str(args.repeat), "--out", out] + (["--edited"] if edited else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
        if not os.path.exists(out):
            return {"ok": False, "error": f"the run died (exit {proc.returncode}): "
                                          f"{proc.stderr.strip()[-800:]}"}
        with open(out, "rb") as f:
            return pickle.load(f)


def compare(got: Any, want: Any, rtol: float, where: str = "") -> str | None:
    """``None`` if ``got`` matches ``want``, else what differs."""
    import numpy as np

    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return f"{where or 'results'}: names {sorted(got) if isinstance(got, dict) else got} " \
                   f"!= {sorted(want)}"
        for k in want:
            bad = compare(got[k], want[k], rtol, f"{where}.{k}" if where else str(k))
            if bad:
                return bad
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: {len(want)} items expected"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            bad = compare(g, w, rtol, f"{where}[{i}]")
            if bad:
                return bad
        return None
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"{where}: shape {g.shape} != dask's {w.shape}"
    if w.dtype.kind in "fc" or g.dtype.kind in "fc":
        if not np.allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.nanmax(
                np.abs(w))) if w.size and np.isfinite(w).any() else 1.0), equal_nan=True):
            err = np.nanmax(np.abs(g - w)) if w.size else 0
            return f"{where}: values differ (max abs difference {err:.3g})"
        return None
    if not np.array_equal(g, w):
        return f"{where}: values differ"
    return None


def _parity_name(error: str) -> str | None:
    """The dask.array name tilegraph lacks, from an error (``needs parity: <name>``)."""
    import re

    m = re.search(r"has no attribute '([^']+)'", error)
    if m and ("tilegraph" in error or "module" in error):
        return m.group(1)
    if "cannot read '" in error and "for axis" in error:
        return "chunks in bytes per axis"
    if "generalized ufuncs are not supported" in error:
        return "gufuncs on tilegraph arrays"
    return None


def run_port(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Both variants of one port, compared: a row of the report."""
    with open(os.path.join(HERE, f"{name}.py")) as f:
        source = f.read()
    edits = _declared(source, "TILEGRAPH_EDITS") or []
    rtol = _declared(source, "RTOL") or 1e-6
    src = _declared(source, "SOURCE") or "?"
    row: dict[str, Any] = {"port": name, "source": src}
    dask_run = _run_child(name, "dask", args)
    if not dask_run["ok"]:
        row.update(unchanged="?", matched="n", note=f"dask failed: {dask_run['error']}")
        return row
    tg_run = _run_child(name, "tilegraph", args)
    row["unchanged"] = "y" if tg_run["ok"] and not edits else "n"
    note = ""
    if not tg_run["ok"]:
        parity = _parity_name(tg_run["error"])
        note = (f"needs parity: {parity}; " if parity else "") + tg_run["error"][:300]
        if edits:
            tg_run = _run_child(name, "tilegraph", args, edited=True)
            note += f" (ran with TILEGRAPH_EDITS: {_declared(source, 'WHY') or ''})"
    elif edits:
        note = "TILEGRAPH_EDITS declared but not needed: remove them"
    if not tg_run["ok"]:
        row.update(matched="n", note=note if not edits else f"{note}; the edited run: "
                   f"{tg_run['error'][:300]}")
        if args.verbose:
            print(tg_run.get("traceback", ""), file=sys.stderr)
        return row
    bad = compare(tg_run["results"], dask_run["results"], rtol)
    row["matched"] = "y" if bad is None else "n"
    row["time_dask"] = dask_run["time"]
    row["time_tilegraph"] = tg_run["time"]
    row["ratio"] = tg_run["time"] / dask_run["time"] if dask_run["time"] > 0 else math.nan
    row["note"] = "; ".join(filter(None, [note, bad]))
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| port | source | unchanged | matched | time vs dask | note |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r.get("ratio")
        t = (f"{ratio:.2f}x ({r['time_tilegraph']:.3f} s / {r['time_dask']:.3f} s)"
             if ratio is not None else "-")
        lines.append(f"| {r['port']} | {r['source']} | {r['unchanged']} | {r['matched']} | "
                     f"{t} | {r.get('note', '')} |")
    n = len(rows)
    lines.append("")
    lines.append(f"unchanged {sum(r['unchanged'] == 'y' for r in rows)}/{n}, "
                 f"matched {sum(r['matched'] == 'y' for r in rows)}/{n}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="")
    p.add_argument("--json", default=None)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--edited", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.scale <= 0 or args.workers < 1 or args.repeat < 1:
        p.error("--scale must be positive, --workers and --repeat at least 1")
    if args.child:
        child(args.child, args.variant, args.scale, args.workers, args.repeat, args.out,
              args.edited)
        return 0
    names = ports()
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            p.error(f"no port named {', '.join(unknown)}; ports: {', '.join(names)}")
        names = wanted
    rows = []
    for name in names:
        row = run_port(name, args)
        rows.append(row)
        print(f"{name}: unchanged {row['unchanged']}, matched {row['matched']}"
              + (f", {row['ratio']:.2f}x dask" if "ratio" in row else "")
              + (f" ({row['note']})" if row.get("note") else ""), flush=True)
    print()
    print(report(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0 if all(r["matched"] == "y" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
