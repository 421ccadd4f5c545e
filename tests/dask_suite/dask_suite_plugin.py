"""A pytest plugin that runs dask's own test modules either on dask's own schedulers
(``TILEGRAPH_DASK_SUITE=dask``) or with every compute that dask would run on one of its
own schedulers (the default one, or one named by ``scheduler=``) routed through
:func:`tilegraph.get` (``TILEGRAPH_DASK_SUITE=tilegraph``; a scheduler function or a
distributed Client that a test passes itself is kept: it is what that test checks), and
writes each test's outcome to the JSON file named by ``TILEGRAPH_DASK_SUITE_OUT``. Loaded
by ``run.py`` (``make dask-suite``) with ``-p``; not part of the default test run."""

from __future__ import annotations

import json
import os

_outcomes: dict[str, str] = {}
_calls = [0]  # computes that reached tilegraph.get


def pytest_configure(config):
    if os.environ.get("TILEGRAPH_DASK_SUITE", "tilegraph") != "tilegraph":
        return
    import dask.base

    import tilegraph

    original = dask.base.get_scheduler

    named = set(dask.base.named_schedulers.values())

    def get_scheduler(get=None, scheduler=None, collections=None, cls=None):
        # dask's checks of its arguments (and errors for bad ones) stay as they are
        chosen = original(get=get, scheduler=scheduler, collections=collections, cls=cls)
        if chosen is None:
            return None
        if scheduler is not None and not isinstance(scheduler, str) and chosen not in named:
            # a test's own scheduler function, or a distributed Client, is what it tests
            return chosen
        return counted_get

    def counted_get(*args, **kwargs):
        _calls[0] += 1
        return tilegraph.get(*args, **kwargs)

    dask.base.get_scheduler = get_scheduler


def pytest_runtest_logreport(report):
    nodeid = report.nodeid
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.outcome == "skipped" else "xpassed"
        _outcomes[nodeid] = outcome
    elif report.when == "teardown" and report.outcome == "failed":
        _outcomes[nodeid] = "error"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("TILEGRAPH_DASK_SUITE_OUT")
    if path:
        with open(path, "w") as f:
            json.dump({"tilegraph_calls": _calls[0], "outcomes": _outcomes}, f, indent=0,
                      sort_keys=True)
