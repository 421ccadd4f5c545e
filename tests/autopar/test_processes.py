"""The processes backend on its own: graphs of CodeStep tasks built by hand, bad input."""

from __future__ import annotations

import io

import pytest

import tilegraph
from tilegraph.autopar.processes import ProcessesBackend
from tilegraph.autopar.steps import CodeStep, ScriptError
from tilegraph.graph import GraphBuilder


def _steps(lines, deps, **extra):
    """A graph of one CodeStep per line of code, with ``deps[i]`` (step indices)."""
    b = GraphBuilder()
    for i, line in enumerate(lines):
        code = compile(line, "<prog>", "exec")
        reads, writes = extra.get("names", {}).get(i, (set(), set()))
        step = CodeStep(i, code, frozenset(reads), frozenset(writes), label=f"step {i}",
                        lineno=i + 1)
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
    tilegraph.pipeline.run(g, g.keys, backend=backend, fuse=False)
    assert out.getvalue() == "135\n"
    assert sum(backend.ran_on) == 4 and backend.transfers >= 1
    with pytest.raises(RuntimeError, match="runs one graph once"):
        tilegraph.pipeline.run(g, g.keys, backend=backend, fuse=False)


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
