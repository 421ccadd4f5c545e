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
