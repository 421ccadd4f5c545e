"""State the def-use analysis cannot see by the names a statement uses: state kept by the
script's functions and classes, writes through ``setattr``, ``vars()``, ``__dict__`` and
``globals()``, replaced builtins and hooks of ``sys``, and the standard input. Each script
runs through ``tilegraph autopar --workers 2`` with the standard output, standard error and
exit status of ``python script.py`` (the sleeps keep two workers busy, so that statements
that would share nothing in a wrong plan run on different processes), and ``--explain``
says what was done about it: a group kept on one worker, a fence, or a serial run."""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import textwrap

import psutil
import pytest

from tilegraph.autopar import analyze, explain
from tilegraph.autopar.runner import ScriptError, has_parallelism, run_script
from tilegraph.cli import main as cli_main

ROOT = pathlib.Path(__file__).parents[2]
SLOW = "import time\ndef slow(x):\n    time.sleep(0.15)\n    return x\n"

CASES = {
    # -- state kept by the script's functions and classes ---------------------------------
    "mutable_default": ("group", "f() keeps the object of its default value of acc", """
        def f(acc=[]):
            acc.append(1)
            return len(acc)
        s1 = slow(1)
        print(f())
        s2 = slow(2)
        print(f())
        print(s1 + s2)
        """),
    "default_mutated_by_a_method": ("group", "Acc.add() keeps", """
        class Acc:
            def add(self, x, into=[]):
                into.append(x)
                return len(into)
        a = Acc()
        s1 = slow(1)
        print(a.add(1))
        s2 = slow(2)
        print(Acc().add(2))
        """),
    "default_returned_and_changed_by_the_caller": ("group", "g() keeps", """
        def g(box={}):
            return box
        first = g()
        s1 = slow(1)
        first["k"] = 1
        s2 = slow(2)
        print(g())
        """),
    "function_attribute": ("group", "f is changed by f()", """
        def f():
            f.calls = getattr(f, "calls", 0) + 1
            return f.calls
        s1 = slow(1)
        x = f()
        s2 = slow(2)
        y = f()
        print(x, y)
        """),
    "class_attribute_changed_through_objects": ("group", "Registry is changed", """
        class Registry:
            items = []
            def register(self, x):
                self.items.append(x)
        r1 = Registry()
        r2 = Registry()
        s1 = slow(1)
        r1.register("a")
        s2 = slow(2)
        r2.register("b")
        r2.items.append("c")
        print(sorted(Registry.items))
        """),
    "class_counter_through_type": ("group", "Node is changed", """
        class Node:
            made = 0
            def __init__(self):
                type(self).made += 1
        s1 = slow(1)
        a = Node()
        s2 = slow(2)
        b = Node()
        print(Node.made)
        """),
    "stateful_decorator": ("group", "wrapped by counted", """
        def counted(fn):
            calls = [0]
            def wrapper(*a):
                calls[0] += 1
                return fn(*a), calls[0]
            return wrapper
        @counted
        def double(x):
            return 2 * x
        s1 = slow(1)
        a = double(1)
        s2 = slow(2)
        b = double(2)
        print(a, b)
        """),
    "stateful_function_through_aliases": ("group", "f() keeps", """
        def f(acc=[]):
            acc.append(1)
            return len(acc)
        g = f
        callbacks = [f]
        s1 = slow(1)
        x = g()
        s2 = slow(2)
        y = callbacks[0]()
        z = f()
        print(x, y, z)
        """),
    "stateful_function_mapped": ("group", "f() keeps", """
        def f(x, seen={}):
            seen[x] = len(seen)
            return seen[x]
        ITEMS = list(range(40))
        out = list(map(f, ITEMS))
        out2 = [f(i + 100) for i in ITEMS]
        print(out[-1], out2[-1])
        """),
    "default_holding_a_changed_global": ("group", "f holds the object of CONFIG", """
        CONFIG = {"k": 1}
        def f(x, d=CONFIG):
            return x + d["k"]
        a = slow(f(1))
        b = slow(f(2))
        CONFIG["k"] = 5
        c = f(3)
        print(a, b, c)
        """),
    "callable_object": ("group", "mutated aliases", """
        class Counter:
            def __init__(self):
                self.n = 0
            def __call__(self):
                self.n += 1
                return self.n
        def run(fn):
            return slow(fn())
        c = Counter()
        x = run(c)
        s1 = slow(1)
        y = run(c)
        s2 = slow(2)
        print(x, y, c.n, s1 + s2)
        """),
    "objects_changed_in_a_comprehension": ("group", "mutated aliases", """
        class P:
            def __init__(self):
                self.v = 0
            def bump(self):
                self.v += 1
                return self.v
        objs = [P(), P()]
        s = slow(1)
        done = [o.bump() for o in objs]
        print(objs[0].v, objs[1].v, s)
        """),
    # -- writes through setattr, vars(), __dict__, globals() ------------------------------
    "setattr_on_a_module": ("fence", "the module attribute json.x", """
        import json
        setattr(json, "x", 5)
        a = slow(1)
        b = slow(2)
        print(json.x, a, b)
        """),
    "vars_and_dict_of_a_module_imported_as": ("fence", "the module attribute j.flag", """
        import json as j
        setattr(j, "flag", "on")
        vars(j).update(other=3)
        j.__dict__["third"] = 4
        vars(j)["fourth"] = 5
        s1 = slow(1)
        s2 = slow(2)
        print(j.flag, j.other, j.third, j.fourth, s1, s2)
        """),
    "module_attribute_incremented_and_deleted": ("fence", "the module attribute json.n", """
        import json
        json.n = 0
        json.gone = 1
        json.n += 1
        del json.gone
        s1 = slow(1)
        s2 = slow(2)
        print(json.n, hasattr(json, "gone"), s1, s2)
        """),
    "function_storing_into_a_module": ("fence", "the attributes of module json", """
        import json
        def configure(mod, value):
            mod.level = value
        configure(json, 7)
        s1 = slow(1)
        s2 = slow(2)
        print(json.level, s1, s2)
        """),
    "module_held_by_a_variable": ("serial", "the module m holds", """
        import json
        m = json
        s1 = slow(1)
        m.flag = "set"
        s2 = slow(2)
        print(json.flag, s1, s2)
        """),
    "globals_update": ("barrier", "globals()", """
        globals().update(alpha=1, beta=2)
        globals()["gamma"] = alpha + beta
        s1 = slow(alpha)
        s2 = slow(gamma)
        print(alpha, beta, gamma, s1, s2)
        """),
    "module_from_sys_modules": ("serial", "taken from sys.modules", """
        import sys
        setattr(sys.modules[__name__], "made", 42)
        s = slow(1)
        print(made, s)
        """),
    # -- builtins and hooks of sys ---------------------------------------------------------
    "print_replaced": ("serial", "changes builtins.print", """
        import builtins
        _orig = builtins.print
        def my_print(*a, **k):
            _orig("LOG:", *a, **k)
        builtins.print = my_print
        a = slow(sum(range(10)))
        b = slow(sum(range(20)))
        print(a)
        print(b)
        """),
    "open_replaced": ("serial", "changes builtins.open", """
        import builtins
        real_open = builtins.open
        log = []
        def tracking_open(*a, **k):
            log.append(a[0])
            return real_open(*a, **k)
        builtins.open = tracking_open
        with open("a.txt", "w") as f:
            f.write("x")
        s = slow(1)
        with open("a.txt") as f:
            data = f.read()
        print(data, log)
        """),
    "builtins_through_dunder": ("serial", "changes builtins._p", """
        def shout(*a, **k):
            __builtins__.__dict__["_p"](*[str(x).upper() for x in a], **k)
        __builtins__._p = print
        __builtins__.print = shout
        s = slow(1)
        print("hello", "world")
        """),
    "print_rebound_as_a_global": ("group", "mutated aliases", """
        _orig = print
        count = [0]
        def my_print(*a):
            count[0] += 1
            _orig(count[0], *a)
        print = my_print
        a = slow(1)
        b = slow(2)
        print(a)
        print(b)
        """),
    "excepthook": ("serial", "changes sys.excepthook", """
        import sys
        def hook(t, v, tb):
            print("hooked", t.__name__, v)
        sys.excepthook = hook
        a = slow(sum(range(10)))
        b = a / 0
        """),
    "excepthook_set_in_a_function_and_failing": ("serial", "changes sys.excepthook", """
        import sys
        def hook(t, v, tb):
            print("in hook", t.__name__)
            raise ValueError("hook broke")
        def install():
            sys.excepthook = hook
        install()
        a = slow(1)
        c = {}["missing"]
        """),
    "displayhook": ("serial", "changes sys.displayhook", """
        import sys
        def show(value):
            if value is not None:
                print("=>", repr(value))
        sys.displayhook = show
        a = slow(1)
        b = slow(2)
        sys.displayhook(a + b)
        """),
    "stdout_replaced": ("serial", "changes sys.stdout", """
        import io
        import sys
        a = slow(1)
        sys.stdout = io.StringIO()
        print("hidden", a)
        kept = sys.stdout.getvalue()
        sys.stdout = sys.__stdout__
        print("shown", repr(kept))
        """),
}

STDIN_CASES = {
    "stdin_read": ("lone", """
        import sys
        a = slow(sum(range(100)))
        b = slow(sum(range(200)))
        data = sys.stdin.read()
        print(repr(data), a, b)
        """),
    "readline_loop": ("group", """
        import sys
        first = sys.stdin.readline()
        a = slow(1)
        rest = []
        while True:
            line = sys.stdin.readline()
            if not line:
                break
            rest.append(line.strip())
        b = slow(2)
        print(repr(first), rest, a, b)
        """),
    "input_piped": ("group", """
        def ask(q):
            return input(q)
        name = ask("name? ")
        a = slow(10)
        age = input("age? ")
        b = slow(20)
        try:
            more = input("more? ")
            more2 = input("more? ")
        except EOFError:
            more2 = "EOF"
        print(name, age, more, more2, a, b)
        """),
    "iterator_and_buffer": ("group", """
        import sys
        lines = iter(sys.stdin)
        a = slow(1)
        head = next(lines)
        b = slow(2)
        tail = [line.upper() for line in lines]
        print(repr(head), tail, a, b)
        """),
    "fileinput_lines": ("lone", """
        import fileinput
        a = slow(1)
        lines = [line.rstrip("\\n") for line in fileinput.input()]
        b = slow(2)
        print(lines, a, b)
        """),
    "stdin_imported_by_name_and_as_a_default": ("group", """
        from sys import stdin
        import sys
        def first_line(src=sys.stdin):
            return src.readline()
        a = first_line()
        x = slow(1)
        b = stdin.readline()
        y = slow(2)
        c = [line.strip() for line in stdin]
        print(repr(a), repr(b), c, x, y)
        """),
    "open_0": ("group", """
        import os
        a = slow(1)
        first = os.read(0, 4)
        b = slow(2)
        rest = open(0).read()
        print(first, repr(rest), a, b)
        """),
}

STDIN = "one\ntwo\nthree\n"


def _script(tmp_path: pathlib.Path, name: str, body: str) -> pathlib.Path:
    script = tmp_path / f"{name}.py"
    script.write_text(SLOW + textwrap.dedent(body).lstrip("\n"))
    return script


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _serial(script: pathlib.Path, stdin: str | None = None) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, str(script)], cwd=script.parent, input=stdin,
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL if stdin is None else None)
    return done.returncode, done.stdout, done.stderr


def _autopar(script: pathlib.Path, stdin: str | None = None, *args: str
             ) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "tilegraph.cli", "autopar", str(script),
                           *(args or ("--workers", "2"))], cwd=script.parent, input=stdin,
                          capture_output=True, text=True, timeout=60, env=_env(),
                          stdin=subprocess.DEVNULL if stdin is None else None)
    return done.returncode, done.stdout, done.stderr


def _no_children(before: set[int]) -> None:
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and p.pid not in before]
    assert left == [], f"worker processes left: {left}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_hidden_state_gives_the_serial_run(name, tmp_path, capsys, monkeypatch):
    """The script run in this process's CLI (its statements on two forked workers, or
    serially here when it must be) against ``python script.py``: stdout, stderr, status."""
    how, reason, body = CASES[name]
    script = _script(tmp_path, name, body)
    expected = _serial(script)
    graph = analyze(script)
    text = explain(graph)
    assert reason in text, text
    if how == "serial":
        assert graph.serial_reason is not None and reason in graph.serial_reason
        assert reason in text.splitlines()[1]   # the second line says why
    else:
        assert graph.serial_reason is None, graph.serial_reason
        assert has_parallelism(graph)
    if how == "group":
        assert "kept on one worker" in text
    elif how == "fence":
        assert any(t.replicated and any(e.kind == "state" and reason in e.detail
                                        for e in t.effects) for t in graph.tasks)
    elif how == "barrier":
        assert any(reason in (t.barrier or "") for t in graph.tasks)
    for f in tmp_path.glob("*.txt"):
        f.unlink()
    if "sys.__stdout__" in body:   # the real stream of the process that runs it
        assert _autopar(script) == expected
        return
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    status = cli_main(["autopar", str(script), "--workers", "2"])
    out, err = capsys.readouterr()
    assert (status, out, err) == expected
    _no_children(before)


def test_an_in_process_serial_run_puts_back_builtins_and_hooks(tmp_path, capsys):
    """A script that must run serially runs in the calling process: what it replaced of
    the builtins and of sys is put back afterwards, and the hook it set saw its error."""
    import builtins

    script = _script(tmp_path, "hooks", """
        import builtins
        import sys
        def hook(t, v, tb):
            sys.stdout.write(f"hooked {t.__name__}\\n")
        sys.excepthook = hook
        sys.displayhook = hook
        builtins.print = lambda *a, **k: None
        builtins.made_up = 1
        del builtins.abs
        x = 1 / 0
        """)
    print_, hooks = builtins.print, (sys.excepthook, sys.displayhook)
    out = io.StringIO()
    with pytest.raises(ScriptError) as info:
        run_script(script, 2, stdout=out, stderr=io.StringIO())
    assert info.value.traceback == "" and info.value.exit_code == 1
    assert out.getvalue() == "hooked ZeroDivisionError\n"   # the hook's, as python prints
    assert builtins.print is print_ and (sys.excepthook, sys.displayhook) == hooks
    assert not hasattr(builtins, "made_up") and builtins.abs(-1) == 1


@pytest.mark.parametrize("name", sorted(STDIN_CASES))
def test_the_standard_input_is_read_by_one_worker_in_program_order(name, tmp_path):
    how, body = STDIN_CASES[name]
    script = _script(tmp_path, name, body)
    graph = analyze(script)
    assert graph.serial_reason is None and has_parallelism(graph)
    readers = [t for t in graph.tasks if any(e.kind == "stdin" for e in t.effects)]
    if how == "group":   # the statements that read it stay on one worker
        assert len(readers) > 1 and len({t.group for t in readers}) == 1
        assert readers[0].group is not None
        assert "the standard input, read in program order" in explain(graph)
    else:
        assert len(readers) == 1
    assert _autopar(script, STDIN) == _serial(script, STDIN)


def test_a_read_of_the_standard_input_the_analysis_missed_fails_with_a_word(tmp_path):
    """A library function reading the standard input is not seen; on a worker its read
    raises an error that says what happened (it never gets an empty input silently)."""
    (tmp_path / "reader_lib.py").write_text("import sys\ndef read_all():\n"
                                            "    return sys.stdin.read()\n")
    script = _script(tmp_path, "missed", """
        import reader_lib
        a = slow(1)
        b = slow(2)
        x = reader_lib.read_all()
        print(len(x), a, b)
        """)
    assert _serial(script, STDIN)[1] == "14 1 2\n"
    status, out, err = _autopar(script, STDIN)
    assert status == 1 and out == ""
    assert "StdinUnread" in err and "did not see it doing: run the script with --workers 1" \
        in err
    assert f'File "{script}", line 8' in err
    assert _autopar(script, STDIN, "--workers", "1") == _serial(script, STDIN)


def test_a_terminal_or_a_closed_standard_input_keeps_the_script_in_one_process(tmp_path):
    """A prompt must show before its statement waits for an answer: with a terminal as
    standard input the script runs serially (and the answers typed reach it); with the
    standard input closed too (sys.stdin is None, as python has it)."""
    import pty

    script = _script(tmp_path, "prompt", """
        a = slow(1)
        name = input("name? ")
        b = slow(2)
        age = input("age? ")
        print(name, age, a, b)
        """)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "autopar", str(script),
                             "--workers", "2"], stdin=slave, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)
    os.close(slave)
    os.write(master, b"bob\n42\n")   # the terminal keeps the lines until they are read
    out, err = proc.communicate(timeout=30)
    os.close(master)
    assert proc.returncode == 0, err
    assert out.decode() == "name? age? bob 42 1 2\n"
    closed = subprocess.run([sys.executable, "-m", "tilegraph.cli", "autopar", str(script),
                             "--workers", "2"], cwd=tmp_path, capture_output=True, text=True,
                            env=_env(), timeout=60, preexec_fn=lambda: os.close(0))
    serial = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, preexec_fn=lambda: os.close(0))
    assert (closed.returncode, closed.stdout, closed.stderr) == \
        (serial.returncode, serial.stdout, serial.stderr)
    assert "lost sys.stdin" in serial.stderr


def test_scripts_without_hidden_state_still_run_in_parallel(tmp_path):
    """Immutable defaults, classes whose attributes nothing changes, modules only read
    (``getattr``, ``print``, a function that calls their functions), functions imported
    by name handed to ``map``, a ``functools.partial`` called: nothing is grouped, fenced
    or serial, loops split, and both workers run statements."""
    script = _script(tmp_path, "plain", """
        import functools
        import json
        import math
        import numpy as np
        from math import sqrt
        class Point:
            dims = ("x", "y")
            scale = 2
            def __init__(self, x):
                self.x = x
            def norm(self):
                return abs(self.x) * self.scale
        def f(x, n=3, kind=None, axis=(0,), dtype=np.float64):
            return x * n
        def total(xp, a):
            return xp.sum(a)
        ITEMS = list(range(30))
        triple = functools.partial(f, n=3)
        a = slow(f(2))
        b = slow(Point(3).norm())
        c = [f(v) for v in ITEMS]
        d = list(map(sqrt, ITEMS))
        e = getattr(json, "dumps")([1])
        g = total(np, np.arange(4))
        h = math.fsum(ITEMS)
        k = [triple(v) for v in ITEMS]
        m = [triple(v) + 1 for v in ITEMS]
        print(a, b, sum(c), round(sum(d), 6), e, g, h, sum(k), sum(m), Point.dims)
        """)
    graph = analyze(script)
    assert graph.serial_reason is None and graph.group_reasons == {}
    assert not any(e.kind == "state" for t in graph.tasks for e in t.effects)
    assert [t.lineno for t in graph.tasks if t.loop == "split"] == [25, 26]
    # a partial is called as what it wraps: calling it changes nothing, nor orders them
    k, m = (next(t for t in graph.tasks if t.source.startswith(x)) for x in ("k =", "m ="))
    assert not k.mutates and k.index not in graph.predecessors()[m.index]
    assert all(t.replicated for t in graph.tasks
               if t.source.startswith(("class", "def", "import", "from")))
    preds = graph.predecessors()
    assert not preds[graph.tasks.index(next(t for t in graph.tasks if t.lineno == 24))] & {
        graph.tasks.index(next(t for t in graph.tasks if t.lineno == 23))}
    out = io.StringIO()
    stats = run_script(script, 2, stdout=out, graph=graph)
    assert out.getvalue() == _serial(script)[1]
    assert min(stats.tasks_per_worker) >= 1, stats


def test_state_kept_by_a_function_pins_only_the_statements_that_use_it(tmp_path):
    script = _script(tmp_path, "pins", """
        def f(acc=[]):
            acc.append(1)
            return len(acc)
        x = f()
        a = slow(1)
        b = slow(2)
        y = f()
        print(x, y, a, b)
        """)
    graph = analyze(script)
    pinned = {t.lineno for t in graph.tasks if t.group is not None}
    assert pinned == {5, 8, 11, 12}   # the def, both calls and the print of their results
    assert graph.tasks[4].group is None and graph.tasks[5].group is None   # the slow ones
    assert 3 in graph.predecessors()[6]   # the second call waits for the first
    out = io.StringIO()
    stats = run_script(script, 2, stdout=out, graph=graph)
    assert out.getvalue() == "1 2 1 2\n"
    assert min(stats.tasks_per_worker) >= 1, stats
