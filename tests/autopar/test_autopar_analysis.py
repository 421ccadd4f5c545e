"""The analysis of scripts into task graphs: exact edges on small scripts, side-effect
classes, groups, barriers and bad input."""

from __future__ import annotations

import textwrap

import pytest

from tilegraph.autopar import AnalysisError, analyze
from tilegraph.autopar.explain import edge_table, explain, to_dot


def edges(src: str) -> set[tuple[int, int, str, str]]:
    return analyze(textwrap.dedent(src).lstrip("\n")).edge_set()


def test_def_use_anti_and_output_edges():
    assert edges("""
        x = 1
        y = x + 1
        x = 2
        print(y)
        """) == {(1, 2, "def-use", "x"), (2, 3, "anti", "x"), (1, 3, "output", "x"),
                 (2, 4, "def-use", "y")}


def test_independent_statements_have_no_edges():
    assert edges("a = 1\nb = 2\nc = [3]\n") == set()


def test_mutation_by_method_item_attribute_and_augmented_assignment():
    assert edges("""
        log = []
        d = {}
        log.append(1)
        d["k"] = 2
        n = len(log)
        log += [3]
        """) == {(1, 3, "def-use", "log"), (2, 4, "def-use", "d"), (3, 5, "def-use", "log"),
                 (3, 6, "def-use", "log"), (5, 6, "anti", "log")}


def test_read_only_methods_do_not_mutate():
    g = analyze("import numpy as np\na = np.ones(3)\nm = a.mean()\ns = a.std()\n")
    assert g.edge_set() == {(1, 2, "def-use", "np"), (2, 3, "def-use", "a"),
                            (2, 4, "def-use", "a")}
    assert g.tasks[2].mutates == frozenset()


def test_globals_read_inside_called_functions_transitively():
    assert edges("""
        z = 1
        def f():
            return z
        def g():
            return f() + 1
        r = g()
        z = 5
        """) == {(2, 6, "def-use", "f"), (4, 6, "def-use", "g"), (1, 6, "def-use", "z"),
                 (6, 7, "anti", "z"), (1, 7, "output", "z")}


def test_function_writing_a_global_defines_it():
    g = analyze("count = 0\ndef bump():\n    global count\n    count += 1\nbump()\n"
                "print(count)\n")
    assert g.tasks[2].defines == {"count"}
    assert (5, 6, "def-use", "count") in g.edge_set()


def test_function_mutating_its_parameter_mutates_the_argument():
    g = analyze("def add(lst):\n    lst.append(1)\nitems = []\nadd(items)\nn = len(items)\n")
    assert g.tasks[2].mutates == {"items"}
    assert (4, 5, "def-use", "items") in g.edge_set()


def test_mutation_through_an_alias():
    g = analyze("a = [1]\nb = a\nb.append(2)\nprint(a)\n")
    assert g.tasks[2].mutates == {"a", "b"}
    assert (3, 4, "def-use", "a") in g.edge_set()
    # aliases that are mutated stay on one worker; a statement that only reads them may
    # take a copy (it is ordered after the change)
    assert g.tasks[0].group == g.tasks[1].group == g.tasks[2].group is not None
    assert g.tasks[3].group is None


def test_a_function_mutates_only_the_arguments_of_the_parameters_it_changes():
    g = analyze(textwrap.dedent("""
        import random
        N = 10
        def fill(rng, n, out=None):
            out.append(rng.random() * n)
        r = random.Random(1)
        xs = []
        fill(r, N, out=xs)
        s = random.Random(2)
        ys = []
        fill(s, N, ys)
        print(xs, ys)
        """).lstrip("\n"))
    assert g.tasks[5].mutates == {"r", "xs"} and g.tasks[8].mutates == {"s", "ys"}
    assert "N" not in g.tasks[5].defines | g.tasks[8].defines
    preds = g.predecessors()   # the two chains are independent
    assert not ({3, 4, 5} & (preds[6] | preds[7] | preds[8]))


def test_output_stream_edges_keep_prints_in_order():
    assert edges("print(1)\nx = 2\nimport sys\nsys.stderr.write('e')\nprint(x)\n") == {
        (1, 4, "output-stream", "stderr"), (4, 5, "output-stream", "stdout"),
        (2, 5, "def-use", "x"), (3, 4, "def-use", "sys")}


def test_file_edges_by_literal_path():
    e = edges("""
        with open("a.txt", "w") as f:
            f.write("a")
        with open("b.txt", "w") as g:
            g.write("b")
        x = open("a.txt").read()
        y = open("b.txt").read()
        z = open("a.txt").read()
        """)
    assert {(s, d, t, v) for s, d, t, v in e if t == "file"} == {
        (1, 5, "file", "a.txt"), (3, 6, "file", "b.txt"), (1, 7, "file", "a.txt")}


def test_unknown_paths_are_ordered_with_every_file_access():
    e = edges("""
        import numpy as np
        name = input_name = "x" + ".npy"
        np.save("a.npy", np.ones(2))
        np.save(name, np.ones(2))
        b = np.load("b.npy")
        """)
    files = {(s, d, v) for s, d, t, v in e if t == "file"}
    assert files == {(3, 4, "a.npy"), (4, 5, "b.npy")}


def test_constant_paths_and_os_path_join_are_resolved():
    g = analyze('import os\nOUT = "res"\nwith open(os.path.join(OUT, "a.txt"), "w") as f:\n'
                '    f.write("1")\n')
    assert any(e.kind == "file" and e.detail == "res/a.txt" for e in g.tasks[2].effects)


def test_cwd_and_environment_edges():
    e = edges("""
        import os
        a = open("x.txt").read()
        os.chdir("sub")
        b = os.getcwd()
        os.environ["K"] = "1"
        c = os.environ.get("K")
        """)
    kinds = {(s, d, t) for s, d, t, _ in e if t in ("cwd", "env")}
    assert kinds == {(2, 3, "cwd"), (3, 4, "cwd"), (5, 6, "env")}


def test_random_state_is_one_shared_resource_and_generators_are_variables():
    g = analyze(textwrap.dedent("""
        import random
        import numpy as np
        random.seed(1)
        a = np.random.rand(3)
        rng = np.random.default_rng(0)
        b = rng.normal()
        c = random.random()
        """).lstrip("\n"))
    e = g.edge_set()
    assert {(s, d) for s, d, t, _ in e if t == "random"} == {(3, 4), (4, 7)}
    assert (5, 6, "def-use", "rng") in e
    assert g.tasks[2].group == g.tasks[3].group == g.tasks[6].group is not None
    assert g.tasks[4].group != g.tasks[2].group   # a generator object is a variable


def test_matplotlib_figure_state_and_its_objects_stay_together():
    g = analyze(textwrap.dedent("""
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        plt.savefig("a.png")
        x = 1
        """).lstrip("\n"))
    assert {(s, d) for s, d, t, _ in g.edge_set() if t == "figure"} == {(2, 4)}
    assert g.tasks[1].group == g.tasks[2].group == g.tasks[3].group is not None
    assert g.tasks[4].group != g.tasks[2].group   # a generator object is a variable


def test_imports_and_sys_path():
    e = edges("import sys\nsys.path.insert(0, 'lib')\nimport json\nx = json.dumps(1)\n")
    assert (2, 3, "import", "sys.path") in e
    g = analyze("import os\nimport json\ndef f():\n    return json\n")
    assert all(t.replicated for t in g.tasks)


@pytest.mark.parametrize("stmt, what", [
    ("import numpy as np\nnp.set_printoptions(precision=2)", "NumPy's print options"),
    ("import numpy\nnumpy.seterr(all='raise')", "floating-point error handling"),
    ("import warnings\nwarnings.simplefilter('error')", "warning filters"),
    ("import matplotlib as mpl\nmpl.rcParams['lines.linewidth'] = 2",
     "module attribute mpl.rcParams"),
    ("import pandas as pd\npd.set_option('display.width', 50)", "pandas' options"),
    ("import sys\nsys.setrecursionlimit(4000)", "recursion limit"),
    ("import time\ntime.tzset()", "time zone"),
    ("import os\nos.sep = '/'", "module attribute os.sep"),
    ("import logging\nlogging.getLogger('x').setLevel(10)", "logging's configuration"),
    ("import decimal\ndecimal.getcontext().prec = 4", "decimal context"),
    ("import locale\nlocale.setlocale(locale.LC_ALL, 'C')", "locale"),
])
def test_a_setting_of_process_state_is_a_fence_run_on_every_worker(stmt, what):
    src = f"a = 1\nb = 2\n{stmt}\nc = 3\nd = 4\n"
    g = analyze(src)
    s = len(stmt.splitlines()) + 1   # the setter's index
    setter = g.tasks[s]
    assert what in next(e.detail for e in setter.effects if e.kind == "state")
    assert setter.replicated and setter.barrier is None and g.serial_reason is None
    preds = g.predecessors()
    assert all(i in preds[s] for i in range(s))                 # after everything before
    assert all(s in preds[i] for i in range(s + 1, len(g.tasks)))  # before everything after
    assert {e.type for e in g.edges if e.src == s or e.dst == s} >= {"state"}
    assert has_parallelism_after(g, s)


def has_parallelism_after(g, s):
    """The statements after the setter (c = 3, d = 4) stay independent of each other."""
    preds = g.predecessors()
    return len(g.tasks) - 2 not in preds[len(g.tasks) - 1]


@pytest.mark.parametrize("stmt, reason", [
    ("import numpy as np\nold = np.seterr(all='raise')", "binds or changes old"),
    ("import numpy as np\nif a:\n    np.set_printoptions(precision=2)\n"
     "    np.save('x.npy', 1)", "changes file"),
    ("import threading\nthreading.Thread(target=print).start()", "threads"),
    ("import atexit\natexit.register(print)", "exit handlers"),
])
def test_what_cannot_run_on_every_worker_makes_the_script_serial(stmt, reason):
    g = analyze(f"a = 1\nb = 2\n{stmt}\nc = 3\n")
    assert g.serial_reason is not None and reason in g.serial_reason, g.serial_reason


@pytest.mark.parametrize("stmt, reason", [
    ("exec('y = 1')", "exec"),
    ("v = eval('1 + 1')", "eval"),
    ("g = globals()", "globals"),
    ("from some_unknown_module import *", "import *"),
    ("import subprocess\nsubprocess.run(['true'])", "subprocess"),
    ("l = locals()", "locals"),
])
def test_barriers(stmt, reason):
    src = f"a = 1\nb = 2\n{stmt}\nc = 3\n"
    g = analyze(src)
    barrier = [t for t in g.tasks if t.barrier is not None]
    assert len(barrier) == 1 and reason in barrier[0].barrier
    b = barrier[0].index
    preds = g.predecessors()
    assert all(i in preds[b] for i in range(b))       # after everything before it
    assert b in preds[len(g.tasks) - 1]                 # before everything after it


def test_del_through_an_alias_is_a_barrier():
    g = analyze("d = {'k': 1}\ne = d\ndel e['k']\nx = 1\n")
    assert g.tasks[2].barrier is not None and "del through e" in g.tasks[2].barrier
    g2 = analyze("d = {'k': 1}\ndel d['k']\nx = 1\n")
    assert g2.tasks[1].barrier is None


def test_star_import_of_a_standard_module_is_understood():
    g = analyze("from math import *\ny = sqrt(4)\n")
    assert g.tasks[0].barrier is None
    assert (1, 2, "def-use", "sqrt") in g.edge_set()


def test_compound_statements_are_one_task():
    g = analyze(textwrap.dedent("""
        total = 0
        for i in range(3):
            total += i
            print(i)
        if total > 1:
            big = True
        else:
            big = False
        """).lstrip("\n"))
    assert [(t.lineno, t.end_lineno) for t in g.tasks] == [(1, 1), (2, 4), (5, 8)]
    assert g.tasks[1].defines == {"i", "total"}
    assert g.tasks[2].defines == {"big"}
    assert g.tasks[1].source.startswith("for i in range(3):")


def test_comprehension_and_lambda_variables_are_local():
    g = analyze("i = 5\nsq = [i * i for i in range(3)]\nf = lambda i: i\n")
    assert g.edge_set() == set()


def test_tasks_carry_lines_and_source():
    g = analyze("x = 1\n\ndef f(a):\n    return a\n\ny = f(x)\n")
    assert [(t.lineno, t.source) for t in g.tasks] == [
        (1, "x = 1"), (3, "def f(a):\n    return a"), (6, "y = f(x)")]


def test_critical_path_is_the_longest_chain():
    g = analyze("a = 1\nb = a + 1\nc = b + 1\nd = 1\ne = c + d\n")
    assert [g.tasks[i].lineno for i in g.critical_path()] == [1, 2, 3, 5]


def test_explain_and_dot():
    g = analyze("x = 1\ny = x + 1\nprint(y)\n")
    assert edge_table(g) == [("line 1", "line 2", "def-use", "x"),
                             ("line 2", "line 3", "def-use", "y")]
    text = explain(g)
    assert "critical path (3 of 3 statements)" in text
    assert "  from    to      type     variable\n  line 1  line 2  def-use  x\n" in text
    dot = to_dot(g)
    assert dot.startswith("digraph script {") and 't0 -> t1 [label="def-use x"' in dot


def test_bad_input_is_rejected_with_a_clear_error(tmp_path):
    with pytest.raises(AnalysisError, match=r"no such script: .*missing\.py"):
        analyze(str(tmp_path / "missing.py"))
    with pytest.raises(AnalysisError, match=r"syntax error in <script>, line 2"):
        analyze("x = 1\nif x\n")
    bad = tmp_path / "bad.py"
    bad.write_text("a = 1\n\ndef f(:\n    pass\n")
    with pytest.raises(AnalysisError, match=r"bad.py, line 3"):
        analyze(bad)
    with pytest.raises(TypeError, match="path or the source text"):
        analyze(42)  # type: ignore[arg-type]


def test_analysis_of_a_long_script_is_fast():
    import time

    lines = []
    for k in range(500):
        lines += [f"v{k} = [{k}] * 10", f"w{k} = sum(v{k}) + {k}",
                  f"v{k}.append(w{k})", f"print(w{k})"]
    t0 = time.perf_counter()
    g = analyze("\n".join(lines) + "\n")
    assert len(g.tasks) == 2000
    assert time.perf_counter() - t0 < 5.0   # about 0.1 s; generous for loaded machines


def test_methods_of_the_scripts_classes_that_change_nothing_are_read_only():
    g = analyze(textwrap.dedent("""
        class P:
            def __init__(self, x):
                self.x = x
            def norm(self):
                return abs(self.x)
            def move(self, d):
                self.x += d
        p = P(3)
        n = p.norm()
        p.move(1)
        """).lstrip("\n"))
    assert g.tasks[2].mutates == frozenset()
    assert g.tasks[3].mutates == {"n", "p"}   # n = p.norm() may share an object with p


def test_which_maps_over_items_split_and_why_the_others_do_not():
    g = analyze(textwrap.dedent("""
        import math
        items = list(range(1000))
        stacks = [[i] for i in range(10)]
        def f(x):
            return math.sqrt(x) * 2
        def grow(xs):
            xs.append(1)
            return 0
        a = [f(x) for x in items]
        b = {x: f(x) for x in items if x % 2}
        c = list(map(f, items))
        d = [f(x) for x in range(10)]
        e = [x.pop() for x in stacks]
        g = [print(x) for x in items]
        h = [f(x) for x in sorted(items)]
        m = [(y := f(x)) for x in items]
        n = [math.sin(x) for x in items]
        print(a, b, c, d, n)
        """).lstrip("\n"))
    loop = {t.source.split(" =")[0]: t.loop for t in g.tasks if t.loop is not None}
    assert {k for k, v in loop.items() if v == "split"} == {"a", "b", "c", "d", "n"}
    assert "it changes e, stacks" in loop["e"]   # .pop() changes the lists in stacks
    assert "output" in loop["g"]
    assert "made once per chunk" in loop["h"]
    assert ":=" in loop["m"]
    g2 = analyze("items = [1]\ndef grow(xs):\n    xs.append(1)\nk = [grow(items) for _ in "
                 "range(3)]\n")
    assert "changes items" in g2.tasks[2].loop
    text = explain(g)
    assert "loops over items:" in text and "does not split: it changes e, stacks" in text


def test_split_loops_over_a_variable_read_nowhere_else_receive_only_their_part():
    g = analyze(textwrap.dedent("""
        items = list(range(100))
        data = [str(i) for i in range(50)]
        def f(x):
            return x * 2
        def g(x):
            return x in items
        a = [f(x) for x in items]
        b = list(map(f, items))
        data = [s + "!" for s in data]
        c = [x + len(items) for x in items]
        d = [g(x) for x in items]
        e = list(map(lambda x: x in items, items))
        h = [f(x) for x in range(10)]
        out = []
        for x in items:
            out.append(x * 2)
        print(a, b, c, d, e, h, out, data)
        """).lstrip("\n"))
    sliced = {t.source.split(" =")[0].split(" in ")[0]: t.sliced for t in g.tasks
              if t.loop == "split"}
    assert sliced == {"data": "data", "a": "items", "b": "items", "c": None, "d": None,
                      "e": None, "h": None, "for x": "items"}, sliced
    assert "each chunk receives only its part of items" in explain(g)


@pytest.mark.parametrize("body, why", [
    ("    out.append(f(x))\n", None),
    ("    y = f(x)\n    if y > 1:\n        out.append(y)\n    table[x] = y\n", None),
    ("    for k in range(3):\n        out.append(k * x)\n", None),
    ("    out.append(x - prev)\n    prev = x\n", "carry prev"),
    ("    if x > 5:\n        break\n    out.append(x)\n", "break"),
    ("    out.append(len(out))\n", "reads out"),
    ("    print(x)\n", "neither appends"),
    ("    out.append(x)\n    out = []\n", "out, which it collects into"),
    ("    out.append(x)\n    table.clear()\n", "changes table"),
    ("    if x:\n        y = x\n    out.append(y)\n", "carry y"),
])
def test_which_for_loops_split(body, why):
    src = ("import math\nitems = list(range(10))\nout = []\ntable = {}\nprev = 0\ny = 0\n"
           "def f(x):\n    return math.sqrt(x)\nfor x in items:\n" + body + "print(out)\n")
    loop = next(t for t in analyze(src).tasks if t.source.startswith("for x"))
    if why is None:
        assert loop.loop == "split", loop.loop
    else:
        assert loop.loop != "split" and why in loop.loop, loop.loop
