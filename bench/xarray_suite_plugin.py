"""A pytest plugin that runs xarray's own test modules with the chunk manager named by
``TILEGRAPH_XARRAY_SUITE`` (``tilegraph`` or ``dask``) as xarray's default, and writes each
test's outcome to the JSON file named by ``TILEGRAPH_XARRAY_SUITE_OUT``. Loaded by
``bench/xarray_suite.py --modules`` with ``-p``; not part of the default test run.

What it changes, and nothing else:

- ``xr.set_options(chunk_manager=...)`` for the whole session, so that the tests' own
  ``.chunk(...)`` calls (the ``use_dask``/``dask``/``backend`` variants of xarray's tests,
  and the ``requires_dask`` tests) make arrays of that manager;
- ``xarray.tests.raise_if_dask_computes`` also counts tilegraph runs (one per
  ``tilegraph.pipeline.run``), so a test that checks that an operation stays lazy checks it
  for tilegraph too;
- ``xarray.tests.dask_array_api`` (the namespace the tests build blocked arrays with
  directly, ``da.arange(20, chunks=3)``) is the tilegraph module (its ``array`` is
  ``asarray``, as dask's: ``tilegraph.array`` is a subpackage), and
  ``xarray.tests.dask_array_type`` (the type ``test_dask.py`` checks lazy results hold) is
  ``tilegraph.Array``;
- the variants of a test parametrized to run on NumPy only (``use_dask=False``,
  ``dask=False``, ``backend="numpy"``) are deselected: they are the same in both runs.

For each test it records which kinds of blocked arrays were made while it ran
(``dask.array.Array`` or ``tilegraph.Array``), so the runner counts only tests that chunk.
"""

from __future__ import annotations

import contextlib
import json
import os

import pytest

_MODE = os.environ.get("TILEGRAPH_XARRAY_SUITE", "tilegraph")
_made: set[str] = set()
_results: dict[str, dict] = {}
_runs = [0]  # tilegraph pipeline runs


def _flag_constructions() -> None:
    import dask.array as da

    import tilegraph.array.core as tcore

    new = da.core.Array.__new__

    def dask_new(cls, *args, **kwargs):
        _made.add("dask")
        return new(cls, *args, **kwargs)

    da.core.Array.__new__ = dask_new  # type: ignore[method-assign]
    init = tcore.Array.__init__

    def tilegraph_init(self, *args, **kwargs):
        _made.add("tilegraph")
        init(self, *args, **kwargs)

    tcore.Array.__init__ = tilegraph_init  # type: ignore[method-assign]


def _count_tilegraph_runs() -> None:
    import tilegraph.pipeline as pipeline

    run = pipeline.run

    def counted_run(*args, **kwargs):
        _runs[0] += 1
        return run(*args, **kwargs)

    pipeline.run = counted_run


@contextlib.contextmanager
def _raise_if_computes(max_computes=0):
    """xarray's ``raise_if_dask_computes`` for dask's scheduler and tilegraph's runs."""
    import dask
    from xarray.tests import CountingScheduler

    before = _runs[0]
    with dask.config.set(scheduler=CountingScheduler(max_computes)):
        yield
    runs = _runs[0] - before
    if runs > max_computes:
        raise RuntimeError(f"Too many computes. Total: {runs} > max: {max_computes}.")


def pytest_configure(config):
    import xarray as xr
    import xarray.tests

    _flag_constructions()
    _count_tilegraph_runs()
    if _MODE == "tilegraph":
        import tilegraph

        xr.set_options(chunk_manager="tilegraph")
        xarray.tests.raise_if_dask_computes = _raise_if_computes
        # xarray's tests build blocked arrays directly with ``dask_array_api`` (the dask
        # chunk manager's ``array_api``): the tilegraph manager's is the tilegraph module
        xarray.tests.dask_array_api = _TilegraphNamespace(tilegraph)
        # the type the tests expect a lazy result to hold (dask's Array): tilegraph's
        xarray.tests.dask_array_type = tilegraph.Array
    elif _MODE != "dask":
        raise ValueError(f"TILEGRAPH_XARRAY_SUITE={_MODE!r}: use 'tilegraph' or 'dask'")


class _TilegraphNamespace:
    """The tilegraph module as the tests' ``da``, with ``da.array`` as dask's (an alias of
    ``asarray``): ``tilegraph.array`` is tilegraph's subpackage, not a function, and a
    test module that calls ``da.array(...)`` while it is collected (``test_dask.py``)
    would fail as a whole."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        if name == "array":
            return self._module.asarray
        return getattr(self._module, name)


_NUMPY_ONLY = {"use_dask": False, "dask": False, "backend": "numpy"}


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        numpy_only = any(k in params and (params[k] is False if v is False else params[k] == v)
                         for k, v in _NUMPY_ONLY.items())
        (dropped if numpy_only else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _made.clear()


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "made": []})
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.outcome == "skipped" else "xpassed"
        entry["outcome"] = outcome
        if report.outcome == "failed":
            entry["error"] = _last_line(report)
    elif report.when == "teardown":
        if report.outcome == "failed":
            entry["outcome"] = "error"
            entry["error"] = _last_line(report)
        entry["made"] = sorted(_made)


def _last_line(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message.splitlines()[0][:300] if crash is not None and crash.message else ""


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TILEGRAPH_XARRAY_SUITE_OUT")
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=1, sort_keys=True)
