"""The pool adapter: the threads pool, and the serverless pool's adapter over the engine's
``tilegraph.serverless.Pool`` interface (a stand-in of that class where the engine is not
installed; the real one is used by test_api's serverless test when it is)."""

from __future__ import annotations

import sys
import types

import pytest

from tilegraph.service.pool import (
    WORKER_KEYS,
    LocalPool,
    PoolUnavailable,
    ServerlessPool,
    make_pool,
)


class StandInPool:
    """The interface of tilegraph.serverless.Pool the adapter relies on."""

    made: list = []

    def __init__(self, workers=None, redis=None, store=None, **options):
        self.args = (workers, redis, store)
        self.options = options
        self.redis_url = redis or "redis://127.0.0.1:6399/0"
        self.store_url = store or "file:///tmp/store"
        self.namespace = "tg-1234"
        self.credentials = types.SimpleNamespace(
            env=lambda: {"TILEGRAPH_REDIS_PASSWORD": "pw", "TILEGRAPH_SECRET": "00" * 32})
        self.closed = False
        StandInPool.made.append(self)

    def workers(self):
        return [{"id": "w1", "pid": 11, "host": "h", "task": "gemm", "lease_expires": 5.0,
                 "rss": 1 << 20, "started": 1.0, "internal": "passed on"}]

    def close(self):
        self.closed = True


def test_serverless_adapter(monkeypatch):
    monkeypatch.setitem(sys.modules, "tilegraph.serverless",
                        types.SimpleNamespace(Pool=StandInPool))
    pool = make_pool(False, 3, "redis://db:6379/1", "s3://bucket/x")
    assert isinstance(pool, ServerlessPool) and pool.kind == "serverless"
    assert pool.pool.args == (3, "redis://db:6379/1", "s3://bucket/x")
    assert pool.env() == {"TILEGRAPH_BACKEND": "serverless",
                          "TILEGRAPH_REDIS": "redis://db:6379/1",
                          "TILEGRAPH_STORE": "s3://bucket/x",
                          "TILEGRAPH_NAMESPACE": "tg-1234",
                          "TILEGRAPH_REDIS_PASSWORD": "pw", "TILEGRAPH_SECRET": "00" * 32}
    assert pool.job_workers() is None
    (w,) = pool.workers([])
    assert tuple(w)[:len(WORKER_KEYS)] == WORKER_KEYS and w["task"] == "gemm"
    assert w["internal"] == "passed on"
    assert "redis://db:6379/1" in pool.describe()
    pool.close()
    assert pool.pool.closed


def test_serverless_pool_options_reach_the_pool_and_not_the_local_one(monkeypatch):
    monkeypatch.setitem(sys.modules, "tilegraph.serverless",
                        types.SimpleNamespace(Pool=StandInPool))
    pool = make_pool(False, 2, scaling_factor=0.5, idle_timeout=None, pipeline_width=3)
    assert pool.pool.options == {"scaling_factor": 0.5, "pipeline_width": 3}
    with pytest.raises(ValueError, match="--scaling-factor, --pipeline-width choose the "
                                         "serverless pool"):
        make_pool(True, scaling_factor=0.5, pipeline_width=3)


def test_serverless_unavailable_says_to_use_local(monkeypatch):
    monkeypatch.setitem(sys.modules, "tilegraph.serverless", None)  # import fails
    with pytest.raises(PoolUnavailable, match=r"serverless engine is unavailable.*--local"):
        make_pool(False)


def test_local_pool(monkeypatch):
    pool = make_pool(True, 2)
    assert isinstance(pool, LocalPool) and pool.env() == {"TILEGRAPH_BACKEND": "threads"}
    assert pool.job_workers() == 2 and pool.workers([]) == []
    job = types.SimpleNamespace(id="abc", pid=None, current={0: "gemm", 1: "add"},
                                started=1.0)
    (w,) = pool.workers([job])
    assert w["id"] == "job-abc" and w["task"] == "add, gemm" and w["rss"] == 0
    assert set(WORKER_KEYS) <= set(w)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="workers must be a positive integer"):
            LocalPool(bad)
