"""Shared fixtures: the backend matrix every runtime test runs on, and a backend that
refuses to compute (to prove that planning never runs tasks)."""

from __future__ import annotations

import threading

import pytest

from tilegraph.runtime.backends import BACKENDS, IDLE_THREAD_NAME, Backend

# dask's own test modules run on tilegraph by `make dask-suite`, never in the default run
collect_ignore = ["dask_suite"]

# (backend, workers) pairs: every conformance test runs on each.
ALL_BACKENDS = [("sync", None), ("threads", 1), ("threads", 2), ("threads", 4)]


class ComputeForbidden(AssertionError):
    """Raised by the "forbidden" backend: something tried to run tasks."""


class ForbiddenBackend(Backend):
    name = "forbidden"

    def run(self, part, execution):
        raise ComputeForbidden(f"a run of {execution.ntasks} tasks was started")


@pytest.fixture(params=ALL_BACKENDS, ids=lambda p: f"{p[0]}-{p[1]}")
def backend_options(request):
    """Options selecting one backend of the matrix: ``get(dsk, k, **backend_options)``."""
    name, workers = request.param
    return {"backend": name, "workers": workers}


@pytest.fixture
def forbid_compute():
    """Registers the "forbidden" backend and makes it the default inside the test."""
    import tilegraph

    BACKENDS["forbidden"] = lambda workers=None: ForbiddenBackend()
    try:
        with tilegraph.config.set(backend="forbidden"):
            yield
    finally:
        del BACKENDS["forbidden"]


@pytest.fixture(autouse=True)
def no_stray_threads():
    """Every test must leave no tilegraph thread running behind it (the provisioner of a
    serverless pool shared by a module's tests lives as long as its pool; the threads
    backend's idle pooled threads wait for the next run)."""
    yield
    stray = [t.name for t in threading.enumerate() if t.name.startswith("tilegraph-")
             and not t.name.startswith("tilegraph-pool-") and t.name != IDLE_THREAD_NAME]
    assert not stray, f"threads left running: {stray}"


@pytest.fixture(scope="module")
def client():
    """A dask.distributed client of an in-process LocalCluster of two one-thread workers,
    for a module's tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield c
