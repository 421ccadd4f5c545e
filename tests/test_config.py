import pytest

import tilegraph


def test_set_is_scoped_and_validated():
    assert tilegraph.config.get("backend") == "threads"
    with tilegraph.config.set(backend="sync", workers=3):
        assert tilegraph.config.get("backend") == "sync"
        assert tilegraph.config.get("workers") == 3
        events = []
        tilegraph.get({"a": 1, "b": (abs, "a")}, "b", callbacks=[events.append])
        assert events[0].backend == "sync"
    assert tilegraph.config.get("backend") == "threads"
    assert tilegraph.config.get("workers") is None
    with pytest.raises(ValueError, match="unknown backend"), tilegraph.config.set(backend="x"):
        pass
    with pytest.raises(TypeError, match="unknown option"), tilegraph.config.set(colour=1):
        pass
    with pytest.raises(TypeError, match="unknown option"):
        tilegraph.config.get("colour")


def test_restored_after_error():
    with pytest.raises(RuntimeError), tilegraph.config.set(retries=2):
        raise RuntimeError
    assert tilegraph.config.get("retries") == 0


def test_placement_and_report_options_are_validated(tmp_path):
    with tilegraph.config.set(placement="locality"):
        assert tilegraph.config.get("placement") == "locality"
    with pytest.raises(ValueError, match="placement must be one of cyclic, locality"):
        tilegraph.config.set(placement="random").__enter__()
    with pytest.raises(ValueError, match="does not exist"):
        tilegraph.get({"a": 1}, "a", report=tmp_path / "missing" / "r.html")
    with pytest.raises(TypeError, match="report must be a file path"):
        tilegraph.get({"a": 1}, "a", report=3)


def test_backend_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TILEGRAPH_BACKEND", "sync")
    assert tilegraph.config.get("backend") == "sync"
    with tilegraph.config.set(backend="threads"):
        assert tilegraph.config.get("backend") == "threads"
    monkeypatch.setenv("TILEGRAPH_BACKEND", "nope")
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        tilegraph.config.get("backend")
