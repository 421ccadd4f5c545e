"""Warnings raised inside tasks carry the user's frame: the line of the user's function that
raised it, or the user's line that called compute, never the executor's or a kernel's line
inside tilegraph."""

import inspect
import os
import threading
import warnings

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime import warning_site

PACKAGE = os.path.dirname(tg.__file__)


def _here() -> int:
    return inspect.currentframe().f_back.f_lineno


def _record(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return seen


def _log_of_block(b):
    return np.log(b)  # the line a user's function raises NumPy's warning on


LOG_LINE = _log_of_block.__code__.co_firstlineno + 1


def _warns_to_caller(b):
    warnings.warn("look at the caller", RuntimeWarning, stacklevel=2)
    return b


@pytest.mark.parametrize("backend", ["threads", "sync"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_kernels_warning_is_shown_at_the_line_that_computed(backend, dtype):
    x = tg.from_numpy(np.zeros((5, 7), dtype=dtype), chunks=(2, 3))  # uneven blocks
    seen = _record(lambda: np.log(x).compute(backend=backend, workers=2))
    line = _here() - 1
    assert seen, "NumPy's divide-by-zero warning was lost"
    for w in seen:
        assert issubclass(w.category, RuntimeWarning)
        assert "divide by zero" in str(w.message)
        assert (w.filename, w.lineno) == (__file__, line), (w.filename, w.lineno)
    seen = _record(lambda: tg.compute((x / x).sum(), backend=backend))
    line = _here() - 1
    assert seen and all((w.filename, w.lineno) == (__file__, line) for w in seen)


def test_a_warning_the_users_function_raises_keeps_its_line():
    x = tg.from_numpy(np.zeros((4, 6)), chunks=(3, 4))
    seen = _record(lambda: x.map_blocks(_log_of_block).compute())
    assert seen and all((w.filename, w.lineno) == (__file__, LOG_LINE) for w in seen)


def test_stacklevel_2_of_the_users_function_points_to_the_users_line():
    x = tg.from_numpy(np.ones((4, 6)), chunks=(3, 4))
    seen = _record(lambda: x.map_blocks(_warns_to_caller, dtype=x.dtype).compute())
    line = _here() - 1
    assert len(seen) == x.npartitions
    assert all((w.filename, w.lineno) == (__file__, line) for w in seen)
    assert not any(w.filename.startswith(PACKAGE) for w in seen)


def test_a_warning_while_an_operation_is_built_is_the_users():
    x = tg.from_numpy(np.ones((4, 6)), chunks=(3, 4))
    seen = _record(lambda: x.map_blocks(_warns_to_caller))  # the dtype is found by a call
    assert seen and not any(w.filename.startswith(PACKAGE) for w in seen)


def test_an_error_filter_still_fails_the_task_with_the_warning():
    x = tg.from_numpy(np.zeros(5), chunks=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="divide by zero"):
            np.log(x).compute()


def test_outside_a_run_nothing_is_moved_and_sites_nest():
    warning_site.install()
    warning_site.install()  # once: the hook is not wrapped twice
    assert not getattr(warnings._showwarnmsg.__wrapped__, "tilegraph_site", False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("plain", UserWarning, stacklevel=1)
        line = _here() - 1
    assert (seen[0].filename, seen[0].lineno) == (__file__, line)
    with warning_site.running_for(("outer.py", 1)):
        with warning_site.running_for(None):
            assert warning_site._here.site is None
        assert warning_site._here.site == ("outer.py", 1)
    assert warning_site._here.site is None


def test_two_threads_computing_each_get_their_own_line():
    x = tg.from_numpy(np.zeros((6, 6)), chunks=3)
    lines: dict[str, int] = {}
    records: list = []
    barrier = threading.Barrier(2)

    def first():
        barrier.wait()
        np.log(x).compute(workers=1)
        lines["first"] = _here() - 1

    def second():
        barrier.wait()
        (1 / x).compute(workers=1)
        lines["second"] = _here() - 1

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ts = [threading.Thread(target=f) for f in (first, second)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        records = list(seen)
    by_text = {("log" in str(w.message)): w.lineno for w in records}
    assert records and all(w.filename == __file__ for w in records)
    assert by_text[True] == lines["first"]
    assert by_text[False] == lines["second"]


def test_user_site_skips_library_frames():
    def from_library():
        return warning_site.user_site()

    assert warning_site.user_site() == (__file__, _here())
    site = from_library()
    assert site[0] == __file__
