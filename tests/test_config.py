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


def test_overlapping_set_blocks_in_two_threads_stay_in_their_threads():
    import threading

    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def run_a():
        with tilegraph.config.set(retries=2, workers=1):
            a_in.set()
            b_in.wait(5)
            seen["a"] = (tilegraph.config.get("retries"), tilegraph.config.get("workers"))
        a_out.set()

    def run_b():
        a_in.wait(5)
        seen["b before"] = tilegraph.config.get("retries")
        with tilegraph.config.set(retries=3):
            b_in.set()
            a_out.wait(5)
            seen["b"] = (tilegraph.config.resolve({}, "test")["retries"],
                         tilegraph.config.get("workers"))

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"a": (2, 1), "b before": 0, "b": (3, None)}
    assert tilegraph.config.get("retries") == 0  # nothing left in force
    assert tilegraph.config.get("workers") is None


def test_max_tasks_is_validated():
    for bad in (0, -1, 2.5, True, "many"):
        with pytest.raises(ValueError, match="max_tasks must be a positive integer"):
            tilegraph.config.set(max_tasks=bad).__enter__()
