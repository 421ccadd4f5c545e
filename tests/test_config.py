import re

import pytest

import tilegraph
from tilegraph.runtime.backends import ThreadsBackend


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
            seen["b"] = (tilegraph.config.resolve({}, "test").retries,
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


# -- the options record: made once per call, passed down ----------------------------------------


@pytest.fixture
def resolves(monkeypatch):
    """The ``where`` of every call of ``config.resolve`` while the test runs."""
    seen = []
    original = tilegraph.config.resolve

    def counted(options, where):
        seen.append(where)
        return original(options, where)

    monkeypatch.setattr(tilegraph.config, "resolve", counted)
    return seen


def test_a_run_resolves_its_options_once(resolves, tmp_path):
    import numpy as np

    x = tilegraph.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
    for call, where in [
        (lambda: x.compute(workers=2), "compute()"),
        (lambda: tilegraph.compute(x.sum(), x.max(), retries=1), "compute()"),
        (lambda: tilegraph.get({"a": 1, "b": (abs, "a")}, "b", workers=1), "get()"),
        (lambda: x.persist(progress=False), "persist()"),
        (lambda: tilegraph.to_zarr(x, tmp_path / "x.zarr"), "to_zarr()"),
        (lambda: tilegraph.to_npy(x, tmp_path / "x.npy"), "to_npy()"),
        (lambda: tilegraph.while_loop(lambda v: v.max() > 1, lambda v: (v / 2,),
                                      [tilegraph.from_numpy(np.array([8.0]), chunks=1)]),
         "while_loop()"),
    ]:
        resolves.clear()
        call()
        assert resolves == [where]


def test_a_run_checks_its_plan_size_once(monkeypatch, tmp_path):
    import numpy as np

    from tilegraph import pipeline

    sizes = []
    original = pipeline.check_plan_size

    def counted(ntasks, limit=None):
        sizes.append(limit)
        return original(ntasks, limit)

    monkeypatch.setattr(pipeline, "check_plan_size", counted)
    x = tilegraph.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
    graph = tilegraph.GraphBuilder()
    graph.add("a", abs, args=(-1,))
    for call in (lambda: (x + 1).compute(max_tasks=1000),
                 lambda: tilegraph.compute(x.sum(), x.max(), max_tasks=1000),
                 lambda: tilegraph.to_npy(x, tmp_path / "x.npy", max_tasks=1000),
                 lambda: tilegraph.get({"a": 1, "b": (abs, "a")}, "b", max_tasks=1000),
                 lambda: tilegraph.run(graph.build(), ["a"], max_tasks=1000)):
        sizes.clear()
        call()
        assert sizes == [1000]  # once, with the call's limit


def test_the_record_is_frozen_and_typed():
    opts = tilegraph.config.resolve({"memory_limit": "1KiB", "callbacks": print}, "test")
    assert isinstance(opts, tilegraph.config.Options)
    assert opts.memory_limit == 1024 and opts.callbacks == (print,)
    assert opts.backend == "threads" and opts.backend_options == {}
    with pytest.raises(AttributeError):
        opts.retries = 3
    with pytest.raises(TypeError):
        opts.backend_options["lease"] = 1.0


def test_bad_values_are_refused_naming_the_option():
    import numpy as np

    x = tilegraph.from_numpy(np.ones(4), chunks=2)
    with pytest.raises(ValueError, match="retries must be a non-negative integer, got -1"):
        x.compute(retries=-1)
    with pytest.raises(ValueError, match="lease must be a positive number of seconds, got 0"):
        x.compute(backend="serverless", lease=0)
    with pytest.raises(ValueError, match="redis must be a URL"):
        tilegraph.config.set(redis="http://host").__enter__()
    with pytest.raises(ValueError, match="mpi_timeout must be a positive number"):
        tilegraph.config.set(mpi_timeout=-1).__enter__()
    with pytest.raises(TypeError, match=r"unknown option.*'colour'.*known options:.*lease"):
        x.compute(colour=1)


def test_an_option_of_another_backend_is_refused_in_the_call():
    import numpy as np

    x = tilegraph.from_numpy(np.ones(4), chunks=2)
    with pytest.raises(ValueError, match="lease= is an option of backend='serverless', "
                                         "not 'threads'"):
        x.compute(backend="threads", lease=5)
    with pytest.raises(ValueError, match="mpi_timeout= is an option of backend='mpi', "
                                         "not 'sync'"):
        tilegraph.get({"a": 1}, "a", backend="sync", mpi_timeout=3)
    with tilegraph.config.set(lease=5, mpi_timeout=3):  # set: left for their backends
        assert x.sum().compute(backend="sync") == 4
        assert tilegraph.config.get("lease") == 5.0
    assert tilegraph.config.get("lease") == 30.0


def test_a_backend_declares_its_options_once_and_its_factory_gets_them():
    from tilegraph.runtime.backends import (
        BACKEND_OPTIONS,
        BACKENDS,
        BackendOption,
        SyncBackend,
        register_backend,
    )

    made = []

    def check_depth(value):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"depth must be a positive integer, got {value!r}")
        return value

    def factory(workers=None, depth=3):
        made.append(depth)
        return SyncBackend()

    register_backend("probe", factory, options={"depth": BackendOption(3, check_depth)})
    try:
        assert tilegraph.get({"a": 1}, "a", backend="probe") == 1
        assert tilegraph.get({"a": 1}, "a", backend="probe", depth=5) == 1
        with tilegraph.config.set(depth=7):
            assert tilegraph.config.get("depth") == 7
            assert tilegraph.get({"a": 2}, "a", backend="probe") == 2
        assert made == [3, 5, 7]
        with pytest.raises(ValueError, match="depth must be a positive integer, got 0"):
            tilegraph.get({"a": 1}, "a", backend="probe", depth=0)
        with pytest.raises(ValueError, match="depth= is an option of backend='probe', "
                                             "not 'threads'"):
            tilegraph.get({"a": 1}, "a", depth=2)
    finally:
        del BACKENDS["probe"], BACKEND_OPTIONS["probe"]


# -- the memory limit: one per process, resolved once --------------------------------------------


def test_the_limit_is_per_process_given_or_the_host_s_default_shared(monkeypatch):
    """``resolve`` leaves an unset limit unset; ``per_process`` makes it the host's default
    divided among the run's processes on this host, while a given limit (in the call or by
    config.set) is per process already and stays as it is, whatever the processes."""
    from tilegraph import config
    from tilegraph.runtime import budget as memory

    monkeypatch.setattr(memory, "_total_memory", lambda: 8 * 2**30)
    host = int(8 * 2**30 * memory.DEFAULT_FRACTION)
    opts = config.resolve({}, "test")
    assert opts.memory_limit is None and not opts.limit_given
    for processes in (1, 2, 3, 4, 64):
        done = config.per_process(opts, processes)
        assert done.memory_limit == host // processes and not done.limit_given
        assert config.per_process(done, 1).memory_limit == host  # from the default again
        assert done._replace(memory_limit=None) == opts  # nothing else changes
    given = config.resolve({"memory_limit": "1GB"}, "test")
    assert given.limit_given and given.memory_limit == 10**9
    assert [config.per_process(given, n).memory_limit for n in (1, 4)] == [10**9] * 2
    with config.set(memory_limit="2GiB"):
        assert config.per_process(config.resolve({}, "test"), 4).memory_limit == 2 * 2**30
        call = config.per_process(config.resolve({"memory_limit": 1000}, "test"), 4)
        assert call.memory_limit == 1000 and call.limit_given  # the call over the setting


@pytest.mark.parametrize("bad, error, match", [
    (0, ValueError, "memory size must be positive, got 0"),
    (-5, ValueError, "memory size must be positive, got -5"),
    ("lots", ValueError, "cannot read memory size 'lots'"),
    ("-1GB", ValueError, "cannot read memory size '-1GB'"),
    (float("inf"), ValueError, "memory size must be finite"),
    (True, TypeError, "memory size must be a number of bytes or a string, got True"),
    ([100], TypeError, r"memory size must be a number of bytes or a string, got \[100\]"),
])
def test_a_bad_memory_limit_is_refused_naming_the_option(bad, error, match):
    import numpy as np

    from tilegraph import config

    named = r"memory_limit \(bytes each process of a run may hold\): " + match
    with pytest.raises(error, match=named):
        config.resolve({"memory_limit": bad}, "test")
    with pytest.raises(error, match=named), config.set(memory_limit=bad):
        pass
    with pytest.raises(error, match=named):
        tilegraph.from_numpy(np.ones(4), chunks=2).compute(memory_limit=bad)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2", None])
def test_per_process_refuses_a_bad_count_of_processes(bad):
    from tilegraph import config

    with pytest.raises(ValueError, match=rf"per_process: local_processes \(the processes of "
                                         rf"the run on this host\) must be a positive int, "
                                         rf"got {re.escape(repr(bad))}"):
        config.per_process(config.resolve({}, "test"), bad)
    with pytest.raises(TypeError, match=r"options must be a tilegraph\.config\.Options"):
        config.per_process({"memory_limit": None}, 1)


class _Ranks(ThreadsBackend):
    """The threads backend, claiming to be one of ``local_processes`` processes on this
    host (as an MPI rank is), so that a run is planned for its share of the host."""

    def __init__(self, local_processes):
        super().__init__(1)
        self.local_processes = local_processes


def test_a_run_is_planned_for_the_limit_its_processes_enforce(monkeypatch, tmp_path):
    """A rechunk that the host's whole default budget holds in memory goes through the
    store on disk when the host is shared by 4 processes: the plan is made for the limit
    each process enforces, which the run record reports, and the values are NumPy's."""
    import numpy as np

    from tilegraph.runtime import budget as memory

    monkeypatch.setattr(memory, "_total_memory", lambda: 8 << 20)  # default: 6 MiB a host
    x = np.arange(256 * 1024, dtype=np.float64).reshape(256, 1024)  # 2 MiB
    out = (tilegraph.from_numpy(x, chunks=(256, 64)) + 0).rechunk((16, 1024))
    for processes, staged in ((1, 0), (4, x.nbytes)):
        got = out.compute(backend=_Ranks(processes), spill_dir=tmp_path)
        np.testing.assert_array_equal(got, x)
        run = tilegraph.last_run()
        assert run.memory_limit == (6 << 20) // processes
        assert run.staged_bytes == staged
        assert run.peak_bytes <= run.memory_limit + 128 * 1024


def test_the_limit_is_resolved_in_one_place_and_nothing_below_reads_the_options():
    """``default_limit`` is called once in the package (``config.per_process``), and no
    module of the array front end, the planner or the pipeline reads or sets an option:
    they take the run's record."""
    import ast
    import pathlib

    root = pathlib.Path(tilegraph.__file__).parent
    calls: dict[str, list[str]] = {"default_limit": [], "config.get": [], "config.set": []}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            for wanted in calls:
                if name == wanted or name.endswith("." + wanted):
                    calls[wanted].append(str(path.relative_to(root)))
    assert calls["default_limit"] == ["config.py"]
    below = [p for name in ("config.get", "config.set") for p in calls[name]
             if p.startswith(("array/", "plan/")) or p == "pipeline.py"]
    assert below == []


def test_set_called_without_with_applies_from_then_on_in_this_thread():
    import contextvars
    import threading

    def body():
        tilegraph.config.set(workers=3)  # as dask.config.set(...) is called
        assert tilegraph.config.get("workers") == 3
        seen = []
        t = threading.Thread(target=lambda: seen.append(tilegraph.config.get("workers")))
        t.start()
        t.join()
        assert seen == [None]  # other threads never see it
        with tilegraph.config.set(workers=5):
            assert tilegraph.config.get("workers") == 5
        assert tilegraph.config.get("workers") == 3

    contextvars.copy_context().run(body)  # a context of its own: nothing leaks to others
    assert tilegraph.config.get("workers") is None
