"""Running scripts in parallel: the same standard output and files as ``python script.py``
for 1, 2 and 4 workers, serial tracebacks, and no worker process left behind."""

from __future__ import annotations

import io
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from tilegraph.autopar import analyze, explain
from tilegraph.autopar.loops import guided_sizes
from tilegraph.autopar.runner import ScriptError, ScriptExit, has_parallelism, run_script
from tilegraph.cli import main as cli_main

CORPUS = pathlib.Path(__file__).parent / "corpus"
ROOT = pathlib.Path(__file__).parents[2]
SCRIPTS = ["clean_data.py", "numpy_analysis.py", "simulation.py", "chdir.py",
           "global_reassign.py", "unpicklable.py"]
try:
    import matplotlib  # noqa: F401

    SCRIPTS.append("plots.py")
except ImportError:  # pragma: no cover - matplotlib is optional
    pass


def _files(root: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _serial(script: pathlib.Path, where: pathlib.Path) -> subprocess.CompletedProcess:
    where.mkdir()
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, str(script)], cwd=where, capture_output=True,
                          text=True, env=env, timeout=120)


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _children_before():
    """Processes this test process had before the test (a server another test module
    started for the whole session is not this test's)."""
    _BEFORE.clear()
    _BEFORE.update(p.pid for p in psutil.Process().children(recursive=True))
    yield


def _no_children() -> None:
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE and p.pid not in _BEFORE]
    assert left == [], f"worker processes left: {left}"


@pytest.fixture(scope="module")
def serial_runs(tmp_path_factory):
    """The reference: every corpus script run by ``python script.py`` in a fresh dir."""
    base = tmp_path_factory.mktemp("serial")
    out = {}
    for name in SCRIPTS:
        where = base / name.removesuffix(".py")
        done = _serial(CORPUS / name, where)
        assert done.returncode == 0, done.stderr
        out[name] = (done.stdout, _files(where))
    return out


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("name", SCRIPTS)
def test_corpus_output_and_files_are_those_of_the_serial_run(name, workers, serial_runs,
                                                             tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("AUTOPAR_TEST_VALUE", raising=False)
    out, err = io.StringIO(), io.StringIO()
    run_script(CORPUS / name, workers, stdout=out, stderr=err)
    os.chdir(tmp_path)
    expected_out, expected_files = serial_runs[name]
    assert out.getvalue() == expected_out
    assert _files(tmp_path) == expected_files
    _no_children()


STATE = sorted(p.name for p in (CORPUS / "state").glob("*.py"))


@pytest.mark.parametrize("name", STATE)
def test_process_state_set_by_one_statement_is_seen_by_the_later_ones(name, tmp_path):
    """One script per kind of process state (print options, error handling, warning
    filters, rcParams, time zone, recursion limit, module attributes, logging, the decimal
    context) and per thing that lives in one process (threads, exit handlers): standard
    output, standard error and exit status byte for byte those of ``python script.py``."""
    if name == "rcparams.py":
        pytest.importorskip("matplotlib")
    script = CORPUS / "state" / name
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    serial = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            env=env, timeout=120)
    assert serial.returncode == 0 and serial.stdout, serial.stderr
    graph = analyze(script)
    assert has_parallelism(graph), name
    if name in ("threads.py", "exit_handler.py"):  # their statements stay in one process
        assert graph.serial_reason is not None
    else:
        assert graph.serial_reason is None, graph.serial_reason
        assert any(t.replicated and any(e.kind == "state" for e in t.effects)
                   for t in graph.tasks)
    for workers in (1, 2, 4):
        run = subprocess.run([sys.executable, "-m", "tilegraph.cli", "autopar", str(script),
                              "--workers", str(workers)], cwd=tmp_path, capture_output=True,
                             env=env, timeout=120)
        assert (run.returncode, run.stdout, run.stderr) == \
            (serial.returncode, serial.stdout, serial.stderr), workers


def test_the_corpus_has_parallelism():
    for name in SCRIPTS:
        if name != "chdir.py":
            assert has_parallelism(analyze(CORPUS / name)), name


def _failing_script(tmp_path: pathlib.Path) -> pathlib.Path:
    script = tmp_path / "fails.py"
    script.write_text(
        "import time\n"
        "a = sum(range(100))\n"
        "print('before', a)\n"
        "def divide(x):\n"
        "    return x // 0\n"
        "b = sum(range(200))\n"
        "c = divide(a)\n"
        "print('never')\n"
        "time.sleep(0.5)\n"
        "with open('after.txt', 'w') as f:\n"
        "    f.write('no')\n")
    return script


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_an_exception_reports_the_serial_file_and_line_and_stops_the_rest(
        workers, tmp_path, monkeypatch):
    script = _failing_script(tmp_path)
    serial = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(ScriptError) as info:
        run_script(script, workers, stdout=out, stderr=err)
    exc = info.value
    assert (exc.filename, exc.lineno) == (str(script), 5)
    assert out.getvalue() == serial.stdout == "before 4950\n"
    # the same frames (file, line, function) and the same last line as the serial traceback
    def frames(text):
        return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("File ")]
    assert frames(exc.traceback) == frames(serial.stderr)
    assert exc.traceback.strip().splitlines()[-1] == serial.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "after.txt").exists()
    _no_children()


def test_the_cli_prints_the_traceback_and_exits_1(tmp_path, capsys, monkeypatch):
    script = _failing_script(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["autopar", str(script), "--workers", "2"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "before 4950\n"
    assert f'File "{script}", line 5, in divide' in captured.err
    assert captured.err.rstrip().endswith("ZeroDivisionError: integer division or modulo by zero")
    _no_children()


def test_sys_exit_stops_with_its_status(tmp_path, monkeypatch):
    script = tmp_path / "exits.py"
    script.write_text("import sys\na = 1\nprint(a)\nb = 2\nsys.exit(3)\nprint('no')\n")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with pytest.raises(ScriptExit) as info:
        run_script(script, 2, stdout=out, stderr=io.StringIO())
    assert info.value.code == 3 and out.getvalue() == "1\n"
    _no_children()


def test_values_that_cannot_be_pickled_stay_where_they_are(tmp_path, monkeypatch):
    # the analysis cannot see that make() returns a generator: the run finds out
    script = tmp_path / "gen.py"
    script.write_text(
        "import itertools\n"
        "def make():\n"
        "    return itertools.chain((i for i in range(5)), [9])\n"
        "g = make()\n"
        "x = sum(range(1000))\n"
        "y = sum(range(2000))\n"
        "first = next(g)\n"
        "rest = list(g)\n"
        "print(first, rest, x + y)\n")
    monkeypatch.chdir(tmp_path)
    for workers in (2, 4):
        out = io.StringIO()
        run_script(script, workers, stdout=out)
        assert out.getvalue() == "0 [1, 2, 3, 4, 9] 2498500\n"
    _no_children()


def test_barriers_and_names_defined_by_exec(tmp_path, monkeypatch):
    script = tmp_path / "dyn.py"
    script.write_text("a = [1, 2]\nb = sum(range(10))\nexec('c = len(a) + b')\n"
                      "d = c * 2\ne = sum(range(5))\nprint(c, d, e)\n")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    run_script(script, 2, stdout=out)
    assert out.getvalue() == "47 94 10\n"
    _no_children()


def test_numpy_arrays_move_between_workers_writable(tmp_path, monkeypatch):
    script = tmp_path / "arrays.py"
    script.write_text("import numpy as np\na = np.arange(100000.0)\nb = np.ones(100000)\n"
                      "a[0] = 5.0\nb[1] = 2.0\nc = a + b\nc[2] = -1\nprint(c[:3], c.sum())\n")
    monkeypatch.chdir(tmp_path)
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    out = io.StringIO()
    stats = run_script(script, 2, stdout=out)
    assert out.getvalue() == serial.stdout
    assert stats.workers == 2
    _no_children()


def test_bad_worker_counts_and_missing_scripts(tmp_path, capsys):
    script = tmp_path / "ok.py"
    script.write_text("x = 1\n")
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="workers must be an integer >= 1"):
            run_script(script, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no such script"):
        run_script(str(tmp_path / "missing.py"), 2)
    assert cli_main(["autopar", str(tmp_path / "missing.py")]) == 2
    assert "no such script" in capsys.readouterr().err
    (tmp_path / "bad.py").write_text("x = (\n")
    assert cli_main(["autopar", str(tmp_path / "bad.py")]) == 2
    assert "syntax error in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["autopar", str(script), "--workers", "0"])


def test_cli_explain_dot_and_script_arguments(tmp_path, capsys, monkeypatch):
    script = tmp_path / "args.py"
    script.write_text("import sys\na = sys.argv[1:]\nb = len(a)\nprint(a, b)\n")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["autopar", str(script), "--explain"]) == 0
    text = capsys.readouterr().out
    assert "critical path" in text and "def-use" in text
    assert cli_main(["autopar", str(script), "--dot", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph script {")
    assert cli_main(["autopar", str(script), "--workers", "2", "--", "x", "--y"]) == 0
    assert capsys.readouterr().out == "['x', '--y'] 2\n"


def test_ctrl_c_leaves_no_worker_process(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import time\na = time.sleep(30)\nb = time.sleep(30)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "autopar", str(script),
                             "--workers", "2"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # as from a terminal, whatever this process does with SIGINT
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 30
    children: list[psutil.Process] = []
    while time.monotonic() < deadline and len(children) < 2:
        time.sleep(0.1)
        children = parent.children(recursive=True)
    assert len(children) >= 2, "the workers did not start"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []


def test_profile_times_statements_and_the_simulation_answers_how_many_workers(
        tmp_path, capsys, monkeypatch):
    from tilegraph.autopar.explain import simulate_workers
    from tilegraph.autopar.runner import profile_script

    script = tmp_path / "sleeps.py"
    script.write_text("import time\nx = [0] * 1000\na = time.sleep(0.1)\n"
                      "b = time.sleep(0.1)\nprint('out')\n")
    monkeypatch.chdir(tmp_path)
    graph = analyze(script)
    prof = profile_script(graph)
    assert len(prof.seconds) == 5 and prof.seconds[2] >= 0.09 and prof.seconds[3] >= 0.09
    assert prof.nbytes[1] >= 8000
    assert capsys.readouterr().out == ""          # the profile run's output is dropped
    rows = simulate_workers(graph, prof.seconds, prof.nbytes)
    assert [r[0] for r in rows] == [1, 2, 4, 8]
    one, two = rows[0][1], rows[1][1]
    assert one >= 0.18 and two < one * 0.7
    assert cli_main(["autopar", str(script), "--explain", "--profile"]) == 0
    text = capsys.readouterr().out
    assert "profile: the serial run took" in text and "2 workers" in text
    assert cli_main(["autopar", str(script), "--profile"]) == 2


def test_the_simulation_runs_a_split_loop_as_its_chunks(tmp_path):
    """A loop that splits is simulated as the runner runs it: guided chunks on all the
    workers, then its join; a loop that does not split stays one task."""
    from tilegraph.autopar.explain import simulate_workers

    script = tmp_path / "loops.py"
    script.write_text("ITEMS = list(range(100))\n"
                      "def f(i):\n"
                      "    return i * i\n"
                      "out = [f(i) for i in ITEMS]\n"
                      "acc = []\n"
                      "for j in range(50):\n"
                      "    acc.append(2 * j)\n"
                      "    acc.append(len(acc))\n"
                      "print(len(out), len(acc))\n")
    graph = analyze(script)
    assert graph.tasks[2].loop == "split"
    assert graph.tasks[4].loop == "it reads acc, which it collects into, inside the loop"
    heavy = [0.0] * len(graph.tasks)
    heavy[2] = 8.0            # the split loop
    rows = {p: secs for p, secs, _ in simulate_workers(graph, heavy, [0] * len(heavy))}
    assert rows[1] == pytest.approx(8.0, rel=1e-3)
    for p in (2, 4, 8):   # the chunks spread evenly: within one smallest chunk of 8 / p
        assert 8.0 / p <= rows[p] <= 8.0 / p + 8.0 / (16 * p) + 1e-3, rows
    heavy[2], heavy[4] = 0.0, 8.0   # the loop that stays one task
    rows = {p: secs for p, secs, _ in simulate_workers(graph, heavy, [0] * len(heavy))}
    assert all(secs == pytest.approx(8.0, rel=1e-3) for secs in rows.values()), rows


def test_a_relative_script_path_gives_the_absolute_file_in_the_traceback(
        tmp_path, capsys, monkeypatch):
    (tmp_path / "rel.py").write_text("a = 1\nb = 2\nc = a / 0\n")
    monkeypatch.chdir(tmp_path)
    serial = subprocess.run([sys.executable, "rel.py"], capture_output=True, text=True,
                            timeout=60)
    assert cli_main(["autopar", "rel.py", "--workers", "2"]) == 1
    assert capsys.readouterr().err == serial.stderr


def test_workers_times_blas_threads_stay_within_the_cores(tmp_path, monkeypatch):
    from tilegraph.util import cores

    script = tmp_path / "blas.py"
    script.write_text(
        "from threadpoolctl import threadpool_info\n"
        "a = max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas')\n"
        "b = max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas')\n"
        "print(a * 2 <= max(2, CORES), b * 2 <= max(2, CORES))\n".replace(
            "CORES", str(cores())))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    run_script(script, 2, stdout=out)
    assert out.getvalue() == "True True\n"
    _no_children()


@pytest.mark.parametrize("name", ["clean_data.py", "simulation.py", "global_reassign.py"])
def test_saveas_script_runs_the_plan_with_the_serial_output(name, tmp_path, serial_runs):
    saved = tmp_path / "parallel.py"
    assert cli_main(["autopar", str(CORPUS / name), "--saveas", str(saved)]) == 0
    text = saved.read_text()
    assert "critical path:" in text and "waits for" in text  # readable by a person
    graph = analyze(CORPUS / name)
    where = tmp_path / "run"
    where.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(saved), "--workers", "2"], cwd=where,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    stdout, files = serial_runs[name]
    assert done.stdout == stdout
    assert _files(where) == files
    # the plan saved is the analysed one
    from tilegraph.autopar.codegen import load_plan

    ns: dict = {}
    exec(compile(text.split('if __name__ == "__main__":')[0], str(saved), "exec"), ns)
    loaded = load_plan(ns["PATH"], ns["SOURCE"], ns["TASKS"], ns["EDGES"], ns["GROUP_REASONS"])
    assert loaded.edge_set() == graph.edge_set()
    assert loaded.tasks == graph.tasks


def test_saveas_failing_script_keeps_the_serial_traceback(tmp_path):
    saved = tmp_path / "parallel.py"
    assert cli_main(["autopar", str(CORPUS / "failing.py"), "--saveas", str(saved)]) == 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(saved), "--workers", "2"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    serial = subprocess.run([sys.executable, str(CORPUS / "failing.py")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert done.returncode == serial.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == serial.stderr.strip().splitlines()[-1]
    assert f'File "{CORPUS / "failing.py"}"' in done.stderr


def test_html_draws_the_graph(tmp_path, capsys):
    page = tmp_path / "g.html"
    assert cli_main(["autopar", str(CORPUS / "numpy_analysis.py"), "--html", str(page)]) == 0
    html = page.read_text()
    graph = analyze(CORPUS / "numpy_analysis.py")
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html
    assert html.count("<rect") == len(graph.tasks)
    assert html.count("<line") == len(graph.edges)
    assert "critical path" in html
    assert cli_main(["autopar", str(CORPUS / "numpy_analysis.py"), "--html",
                     str(tmp_path / "missing" / "g.html")]) == 2
    assert "no directory" in capsys.readouterr().err
    assert cli_main(["autopar", str(CORPUS / "numpy_analysis.py"), "--saveas",
                     str(tmp_path / "missing" / "p.py")]) == 2


# -- the run goes through the one pipeline --------------------------------------------------


def test_a_run_is_a_pipeline_run_with_events_and_a_report(tmp_path, monkeypatch):
    from tilegraph.pipeline import last_run
    from tilegraph.runtime.events import RunEnd, TaskEnd, TaskStart

    script = tmp_path / "halves.py"
    script.write_text("a = sum(range(200000))\nb = sum(range(300000))\nprint(a + b)\n")
    monkeypatch.chdir(tmp_path)
    events: list = []
    out = io.StringIO()
    run_script(script, 2, stdout=out, callbacks=[events.append],
               report=str(tmp_path / "run.html"))
    assert out.getvalue() == f"{sum(range(200000)) + sum(range(300000))}\n"
    starts = [e.key for e in events if isinstance(e, TaskStart)]
    assert sorted(starts) == [("statement", 0), ("statement", 1), ("statement", 2)]
    assert starts.index(("statement", 2)) == 2   # it waits for both halves
    ends = {e.key: e for e in events if isinstance(e, TaskEnd)}
    assert ends[("statement", 0)].kind == "statement"
    assert [e.status for e in events if isinstance(e, RunEnd)] == ["done"]
    summary = last_run()
    assert summary.backend == "processes" and summary.ntasks == 3 and summary.workers == 2
    page = (tmp_path / "run.html").read_text()
    assert "tilegraph run (processes)" in page and "<title>line 2" in page
    _no_children()


def test_the_cli_writes_a_report_and_refuses_it_without_a_run(tmp_path, capsys, monkeypatch):
    script = tmp_path / "s.py"
    script.write_text("a = sum(range(1000))\nb = sum(range(2000))\nprint(a, b)\n")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["autopar", str(script), "--workers", "2", "--report", "r.html"]) == 0
    assert capsys.readouterr().out == "499500 1999000\n"
    assert (tmp_path / "r.html").read_text().startswith("<!")
    assert cli_main(["autopar", str(script), "--explain", "--report", "r.html"]) == 2
    assert "--report goes with a run" in capsys.readouterr().err
    assert cli_main(["autopar", str(script), "--report", str(tmp_path / "no" / "r.html")]) == 2
    assert "no directory" in capsys.readouterr().err


def test_a_worker_process_killed_mid_run_stops_the_run_and_leaves_nothing(tmp_path,
                                                                         monkeypatch):
    script = tmp_path / "victim.py"
    script.write_text("import os, signal, time\n"
                      "a = sum(range(1000))\n"
                      "b = os.kill(os.getpid(), signal.SIGKILL)\n"
                      "c = time.sleep(0.2)\n"
                      "print(a, c)\n")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with pytest.raises(ScriptError, match=r"died \(exit code -9\) while running line 3"):
        run_script(script, 2, stdout=out)
    assert out.getvalue() == ""
    _no_children()


def test_a_failure_lets_earlier_statements_finish_and_starts_no_later_one(tmp_path,
                                                                         monkeypatch):
    # line 3 fails at once while line 2 still sleeps: line 2's output and file still come,
    # as in the serial run; line 4 (independent of both) never starts
    script = tmp_path / "order.py"
    script.write_text("import time\n"
                      "a = (time.sleep(0.5), print('slow first'), open('a.txt', 'w').write('a'))\n"
                      "b = 1 / 0\n"
                      "c = (print('never'), open('c.txt', 'w').write('c'))\n")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with pytest.raises(ScriptError) as info:
        run_script(script, 2, stdout=out)
    assert info.value.lineno == 3 and "ZeroDivisionError" in info.value.traceback
    assert out.getvalue() == "slow first\n"
    assert (tmp_path / "a.txt").read_text() == "a" and not (tmp_path / "c.txt").exists()
    _no_children()


def test_independent_chains_of_shared_objects_run_on_different_processes(tmp_path):
    """Two chains, each over its own random.Random (kept on one process), that share only a
    constant: the second chain's first step avoids the process bound to the first chain."""
    script = tmp_path / "halves.py"
    script.write_text(textwrap.dedent("""
        import random
        N = 400000  # each step long enough that the first chain is still running when
                    # the second one starts, on a loaded machine too
        def heavy(rng, n):
            return sum(rng.random() for _ in range(n))
        r1 = random.Random(1)
        a1 = heavy(r1, N)
        a2 = heavy(r1, N)
        r2 = random.Random(2)
        b1 = heavy(r2, N)
        b2 = heavy(r2, N)
        print(round(a1 + a2, 6), round(b1 + b2, 6))
        """).lstrip("\n"))
    graph = analyze(script)
    groups = {t.group for t in graph.tasks if t.group is not None}
    assert len(groups) == 2
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    out = io.StringIO()
    stats = run_script(script, 2, stdout=out, graph=graph)
    assert out.getvalue() == serial.stdout
    assert min(stats.tasks_per_worker) >= 3, stats   # each process ran a chain
    _no_children()


LOOPS = textwrap.dedent("""
    import math
    import numpy as np
    ITEMS = list(range(41))
    GRID = np.arange(24.0).reshape(8, 3)
    NAMES = {f"k{i}": i for i in range(9)}
    def work(i):
        return round(sum(math.sin(i * k) for k in range(2000)), 9)
    squares = [work(i) for i in ITEMS if i % 3]
    table = {i: work(i) for i in range(0, 41, 4)}
    mapped = list(map(work, ITEMS))
    rows = [float(r.sum()) for r in GRID]
    keys = [k.upper() for k in NAMES]
    empty = [work(i) for i in ITEMS[:0]]
    once = [x * 2 for x in (i for i in range(5))]
    print(squares[:3], len(squares), table, sum(mapped), rows, keys, empty, once)
    """).lstrip("\\n")


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_maps_over_items_split_across_processes_give_the_serial_result(workers, tmp_path):
    script = tmp_path / "loops.py"
    script.write_text(LOOPS)
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    graph = analyze(script)
    split = [t.lineno for t in graph.tasks if t.loop == "split"]
    assert len(split) == 6, [(t.lineno, t.loop) for t in graph.tasks]
    out = io.StringIO()
    stats = run_script(script, workers, stdout=out, graph=graph)
    assert out.getvalue() == serial.stdout
    if workers > 1:   # each split loop ran as guided chunks, plus its join
        plain = sum(not t.replicated for t in graph.tasks)
        chunks = len(guided_sizes(workers))
        assert sum(stats.tasks_per_worker) == plain + len(split) * chunks, stats
        assert min(stats.tasks_per_worker) >= 1, stats
    _no_children()


def test_an_error_in_a_split_loop_is_the_serial_error(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("ITEMS = list(range(10))\n"
                      "def inv(i):\n"
                      "    return 1 / (i - 7)\n"
                      "print('before')\n"
                      "out = [inv(i) for i in ITEMS]\n"
                      "print('never')\n")
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    assert analyze(script).tasks[3].loop == "split"
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(ScriptError) as info:
        run_script(script, 2, stdout=out, stderr=err)
    assert out.getvalue() == "before\n"
    assert info.value.traceback == serial.stderr
    _no_children()


FOR_LOOPS = textwrap.dedent("""
    import math
    ITEMS = list(range(37))
    results = []
    table = {"first": None}
    def work(i):
        return round(sum(math.sin(i * k) for k in range(500)), 9)
    for i in ITEMS:
        v = work(i)
        if v > 0:
            results.append(v)
        else:
            results.append(-v)
        table[i % 5] = v
    print(len(results), sum(results), table, i, v)
    empty = []
    for j in range(0):
        w = j
        empty.append(j)
    print(empty, "w" in globals(), "j" in globals())
    """).lstrip("\\n")


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_for_loops_that_collect_split_and_leave_the_serial_state(workers, tmp_path):
    script = tmp_path / "loops.py"
    script.write_text(FOR_LOOPS)
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    graph = analyze(script)
    assert [t.loop for t in graph.tasks if t.loop is not None] == ["split", "split"]
    out = io.StringIO()
    stats = run_script(script, workers, stdout=out, graph=graph)
    assert out.getvalue() == serial.stdout
    if workers > 1:
        plain = sum(not t.replicated for t in graph.tasks)
        assert sum(stats.tasks_per_worker) == plain + 2 * len(guided_sizes(workers)), stats
    _no_children()


SLICED = textwrap.dedent("""
    import time
    import numpy as np
    def make(n):
        return [bytes([i % 251]) * 50_000 for i in range(n)]
    def slow(b):
        time.sleep(0.004)
        return len(b) + int(b[0])
    BLOBS = make(96)
    GRID = np.arange(96 * 625.0).reshape(96, 625)
    ROWS = [[i, i + 1] for i in range(30)]
    SEEN = {3, 1, 2}
    sizes = [slow(b) for b in BLOBS]
    sums = list(map(float, GRID.sum(axis=1)))
    sums2 = [float(r.sum()) for r in GRID]
    firsts = []
    for r in ROWS:
        firsts.append(r[0] * 2)
    tripled = [x * 3 for x in SEEN]
    print(sum(sizes), sum(sums), sum(sums2), firsts, sorted(tripled), len(BLOBS))
    """).lstrip("\n")


def test_a_split_loop_sends_each_process_only_its_part_of_the_items(tmp_path):
    """The process that holds a split loop's items slices them: every other process
    receives only its chunks' parts (the whole of BLOBS, 4.8 MB, went to every process
    that ran a chunk before)."""
    script = tmp_path / "sliced.py"
    script.write_text(SLICED)
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    graph = analyze(script)
    assert [(t.lineno, t.sliced) for t in graph.tasks if t.loop == "split"] == \
        [(10, None), (12, "BLOBS"), (14, "GRID"), (16, "ROWS"), (18, "SEEN")]
    blobs, grid = 96 * 50_000, 96 * 625 * 8
    for workers in (2, 4):
        out = io.StringIO()
        stats = run_script(script, workers, stdout=out, graph=graph)
        assert out.getvalue() == serial.stdout
        # the guided chunks go to whichever process is free, so how many a process runs
        # depends on timing; but every item reaches at most one process, once: sent whole,
        # BLOBS and GRID would reach every process that runs a chunk of them
        assert sum(stats.bytes_received) <= 1.2 * (blobs + grid) + 300_000, stats
        assert max(stats.bytes_received) <= 0.95 * (blobs + grid), stats
    _no_children()


def test_a_split_loop_over_a_missing_variable_raises_the_serial_error(tmp_path):
    script = tmp_path / "missing.py"
    script.write_text("import math\n"
                      "if math.pi < 3:\n"
                      "    ITEMS = [1, 2]\n"
                      "print('before')\n"
                      "out = [x + 1 for x in ITEMS]\n")
    serial = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    assert analyze(script).tasks[3].sliced == "ITEMS"
    out = io.StringIO()
    with pytest.raises(ScriptError) as info:
        run_script(script, 2, stdout=out)
    assert out.getvalue() == "before\n"
    assert info.value.traceback == serial.stderr
    _no_children()


@pytest.mark.parametrize("workers", [2, 4])
def test_a_log_file_set_up_on_every_worker_has_the_serial_lines_in_order(workers, tmp_path,
                                                                         monkeypatch):
    """logging.basicConfig(filename=...) runs on every worker; the lines its handlers write
    from statements on different processes reach the file in program order, byte for byte
    the serial run's file (which it truncates: filemode="w"), and a later statement that
    reads the file finds them."""
    script = CORPUS / "state" / "logging_file.py"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    runs = {}
    for name, cmd in (("serial", [sys.executable, str(script)]),
                      ("parallel", [sys.executable, "-m", "tilegraph.cli", "autopar",
                                    str(script), "--workers", str(workers)])):
        where = tmp_path / name
        where.mkdir()
        (where / "run.log").write_text("a line of an earlier run\n")
        done = subprocess.run(cmd, cwd=where, capture_output=True, env=env, timeout=120)
        runs[name] = (done.returncode, done.stdout, done.stderr, _files(where))
    assert runs["parallel"] == runs["serial"]
    assert runs["serial"][3]["run.log"].decode().splitlines()[0].startswith("INFO a is")
    graph = analyze(script)
    assert graph.serial_reason is None
    monkeypatch.chdir(tmp_path / "parallel")
    stats = run_script(script, workers, stdout=io.StringIO(), graph=graph)
    assert sorted(stats.tasks_per_worker)[-2] >= 2, stats   # the statements spread out
    _no_children()


def test_logging_handlers_that_write_in_their_own_order_keep_the_script_serial(tmp_path):
    script = tmp_path / "rotating.py"
    script.write_text("import logging.handlers\n"
                      "h = logging.handlers.RotatingFileHandler('r.log', maxBytes=50)\n"
                      "a = sum(range(10))\n"
                      "b = sum(range(20))\n"
                      "print(a, b)\n")
    graph = analyze(script)
    assert "rotating files" in graph.serial_reason
    assert "rotating files" in explain(graph).splitlines()[1]
