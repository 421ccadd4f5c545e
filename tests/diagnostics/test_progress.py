import io
import time

import tilegraph
from tilegraph.diagnostics import ProgressBar, progress_wanted


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_wanted():
    assert progress_wanted(True) is True
    assert progress_wanted(False) is False
    assert progress_wanted("auto", Tty()) is True
    assert progress_wanted("auto", io.StringIO()) is False  # not a terminal: off
    closed = io.StringIO()
    closed.close()
    assert progress_wanted("auto", closed) is False  # isatty() raises on a closed stream


def slow(i):
    time.sleep(0.002)
    return i


def test_bar_appears_only_for_long_runs():
    from tilegraph.graph import from_dask
    from tilegraph.plan import order
    from tilegraph.runtime.backends import make_backend
    from tilegraph.runtime.core import Execution

    dsk = {("s", i): (slow, i) for i in range(100)}
    dsk["all"] = (sum, [("s", i) for i in range(100)])
    g = from_dask(dsk)
    out = g.indices(["all"])

    backend = make_backend("threads", 2)
    stream = Tty()
    ex = Execution(g, out, order(g, out))
    with ProgressBar(ex, delay=0.05, interval=0.01, stream=stream) as bar:
        backend.run(backend.partition(g, out, order(g, out)), ex)
    assert bar.shown
    text = stream.getvalue()
    assert "101/101" in text and "tilegraph" in text
    assert "mem " in text

    stream = Tty()
    ex = Execution(g, out, order(g, out))
    with ProgressBar(ex, delay=30, stream=stream) as bar:
        backend.run(backend.partition(g, out, order(g, out)), ex)
    assert not bar.shown and stream.getvalue() == ""


def test_memory_text():
    from tilegraph.diagnostics.progress import memory_text

    class Ex:
        live, reserved, limit, spilled_bytes = 3 * 2**20, 2**20, 2**30, 0

    assert memory_text(Ex()) == "mem 4.0 MiB/1.0 GiB"
    Ex.spilled_bytes = 5 * 2**20
    assert memory_text(Ex()) == "mem 4.0 MiB/1.0 GiB spilled 5.0 MiB"


def test_progress_option_off_prints_nothing(capsys):
    tilegraph.get({"a": (slow, 1)}, "a", progress=False)
    assert capsys.readouterr().err == ""
