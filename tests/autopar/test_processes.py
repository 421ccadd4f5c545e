"""The processes backend on its own: graphs of CodeStep tasks built by hand, bad input."""

from __future__ import annotations

import io
import os

import pytest

import tilegraph
from tilegraph.autopar.processes import ProcessesBackend, StepsDone
from tilegraph.autopar.steps import CodeStep, ScriptError
from tilegraph.graph import GraphBuilder
from tilegraph.runtime.backends import Partition


def _steps(lines, deps, **extra):
    """A graph of one CodeStep per line of code, with ``deps[i]`` (step indices)."""
    b = GraphBuilder()
    for i, line in enumerate(lines):
        code = compile(line, "<prog>", "exec")
        reads, writes = extra.get("names", {}).get(i, (set(), set()))
        reading = i in extra.get("stdin", ())
        step = CodeStep(i, code, frozenset(reads), frozenset(writes), label=f"step {i}",
                        lineno=i + 1, stdin=reading, group=0 if reading else None)
        b.add(("s", i), step, deps=[("s", d) for d in deps.get(i, ())], kind="statement",
              serial=i, priority=i, retries=0)
    return b.build()


def test_hand_built_steps_share_variables_across_processes():
    names = {0: (set(), {"x"}), 1: (set(), {"y"}), 2: ({"x", "y"}, {"z"}),
             3: ({"z"}, set())}
    # x and y take a while, so that they run on two processes and z needs a transfer
    g = _steps(["x = (__import__('time').sleep(0.2), sum(range(10)))[1]",
                "y = (__import__('time').sleep(0.2), [1, 2, 3])[1]", "z = x * len(y)",
                "print(z)"],
               {2: [0, 1], 3: [2]}, names=names)
    out = io.StringIO()
    backend = ProcessesBackend(2, filename="<prog>", out=out)
    ends = []
    tilegraph.pipeline.run(g, g.keys, backend=backend, fuse=False, callbacks=[
        lambda e: ends.append(e) if isinstance(e, StepsDone) else None])
    assert out.getvalue() == "135\n"
    (end,) = ends
    assert sum(end.tasks_per_worker) == 4 and end.transfers >= 1
    assert end.bytes_moved == sum(end.bytes_received) > 0
    # the backend object kept nothing of that run: it runs the graph again, from scratch
    tilegraph.pipeline.run(g, g.keys, backend=backend, fuse=False)
    assert out.getvalue() == "135\n135\n"
    with pytest.raises(TypeError, match="runs the StepsPartition its partition"):
        backend.run(Partition(g, [], list(range(len(g)))), None)


def test_a_failing_step_raises_the_programs_traceback():
    g = _steps(["a = 1", "b = a / 0"], {1: [0]}, names={0: (set(), {"a"}),
                                                      1: ({"a"}, {"b"})})
    with pytest.raises(ScriptError) as info:
        tilegraph.pipeline.run(g, g.keys, backend=ProcessesBackend(2, filename="<prog>"),
                               fuse=False)
    assert "ZeroDivisionError: division by zero" in info.value.traceback


def test_the_processes_backend_refuses_what_it_cannot_run():
    b = GraphBuilder()
    b.add("t", abs, args=(-1,))
    with pytest.raises(TypeError, match="runs CodeStep tasks only; task 't' is <built-in"):
        tilegraph.pipeline.run(b.build(), ["t"], backend=ProcessesBackend(2, filename="<p>"))
    with pytest.raises(ValueError, match="workers must be an integer >= 1, got 0"):
        ProcessesBackend(0, filename="<p>")
    with pytest.raises(TypeError, match="code must be a code object, got str"):
        CodeStep(0, "x = 1")
    with pytest.raises(ValueError, match=r"changes must name parts of .*got \['home'\]"):
        CodeStep(0, compile("x = 1", "<p>", "exec"), changes=("home",))
    step = CodeStep(3, compile("x = 1", "<p>", "exec"), label="line 4")
    with pytest.raises(RuntimeError, match="line 4 is a step of a program"):
        step()
    with pytest.raises(ValueError, match="reads the standard input runs on one process"):
        CodeStep(0, compile("x = input()", "<p>", "exec"), everywhere=True, stdin=True)
    with pytest.raises(TypeError, match="stdin must be True or False, got 'yes'"):
        ProcessesBackend(2, filename="<p>", stdin="yes")  # type: ignore[arg-type]


@pytest.fixture
def piped_stdin():
    """This process's descriptor 0 is a pipe holding three lines, for the test."""
    r, w = os.pipe()
    os.write(w, b"first\nsecond\nthird\n")
    os.close(w)
    saved = os.dup(0)
    os.dup2(r, 0)
    os.close(r)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def test_only_the_steps_marked_stdin_read_the_standard_input(piped_stdin):
    """Steps marked stdin (kept on one process) read this process's standard input in
    order, through input() and sys.stdin; a step not marked that reads
    sys.stdin fails with an error that says so; without stdin=True no step reads it."""
    names = {0: (set(), {"a"}), 1: (set(), {"b"}), 2: (set(), {"c"}),
             3: ({"a", "b", "c"}, set())}
    g = _steps(["a = input()", "b = __import__('sys').stdin.readline()",
                "c = (__import__('time').sleep(0.1), 1)[1]", "print(a, repr(b), c)"],
               {1: [0], 3: [0, 1, 2]}, names=names, stdin={0, 1})
    out = io.StringIO()
    tilegraph.pipeline.run(g, g.keys, backend=ProcessesBackend(2, filename="<prog>",
                                                               out=out, stdin=True),
                           fuse=False)
    assert out.getvalue() == "first 'second\\n' 1\n"
    g = _steps(["a = 1", "b = __import__('sys').stdin.read()"], {1: [0]},
               names={0: (set(), {"a"}), 1: (set(), {"b"})})
    for given in (True, False):
        with pytest.raises(ScriptError, match="StdinUnread") as info:
            tilegraph.pipeline.run(g, g.keys, backend=ProcessesBackend(
                2, filename="<prog>", stdin=given), fuse=False)
        assert "run the script with --workers 1" in info.value.traceback
