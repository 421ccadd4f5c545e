"""Automatic parallelisation of a serial script: speed-up on 2 workers against
``python script.py``, and the analysis time of a 2,000-line script.

The script has two independent heavy halves of pure-Python work (each a loop of integer
arithmetic) and prints both results (a second script has two NumPy halves, sorts that
release the GIL); ``tilegraph autopar script.py --workers 2`` runs the
halves on two forked processes. Both commands are timed end to end as processes (so the
figure includes starting Python, importing what autopar needs -- about 0.25 s here --,
analysing and forking), in ``--repeat`` paired rounds: each round runs the serial command
and then the parallel one, so that a slow spell of the shared machine falls on both sides;
the best times' ratio and the median of the rounds' own ratios are printed (the NumPy
script: best of ``--repeat`` runs). ``run_script`` called in this process
(no interpreter start, tilegraph already imported) is timed too, to separate the parallel
run from the start-up. Python keeps compiled modules between runs, as it does by default
(the variable ``PYTHONDONTWRITEBYTECODE`` is removed for the timed commands). The generated
2,000-line script mixes assignments, calls of functions
that read globals, prints, file writes and loops. Goals: speed-up >= 1.5x on 2 workers;
analysis <= 1 s.

Three more workloads:

- *chains*: two independent chains of heavy pure-Python statements, each over its own
  seeded ``random.Random`` (so each chain stays on one process), sharing only a constant
  defined at the top, a third independent statement, and a summary. Goals: >= 1.6x on 2
  workers, and the measured speed-up within 15% of the one ``--explain --profile``
  simulates (the in-process run, which leaves out the interpreter's start, is the one
  compared).
- *comprehension*: the heavy work is one list comprehension over 200 items of about 20 ms
  each. Goal: >= 1.7x on 2 workers.
- *skewed comprehension*: 120 items whose cost grows linearly with the item, so that one
  equal half of the items is 3x the work of the other (no goal; split in two equal parts,
  the loop could not pass 1.33x).
- *state*: the scripts of ``tests/autopar/corpus/state`` (one per kind of process state),
  at 1, 2 and 4 workers. Goal: standard output, standard error and exit status identical to
  ``python script.py`` in every run.
- *start-up*: how long after ``run_script(script, 2)`` is called (tilegraph imported, the
  script analysed) its first statement starts on a worker process, by ``perf_counter``
  (one monotonic clock for all the processes): forking the workers, readying them, the
  first steps' messages. Median of 20 runs.

Run: ``python bench/autopar.py [--n 60000000] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HEAVY = '''\
def work(n, seed):
    total = seed
    for i in range(n):
        total = (total * 31 + i) % 1000003
    return total


left = work({n}, 1)
right = work({n}, 2)
print("left", left)
print("right", right)
print("both", left + right)
'''

HEAVY_NUMPY = '''\
import numpy as np


def work(n, seed):
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(n):
        x = rng.random(2_000_000)
        x.sort()
        total += float(x[1000])
    return total


left = work({m}, 1)
right = work({m}, 2)
print("left", round(left, 9))
print("right", round(right, 9))
'''


CHAINS = '''\
import random

N = {n}
SCALE = 2.0


def heavy(rng, n):
    s = 0.0
    for _ in range(n):
        s += (rng.random() * SCALE) ** 2
    return s


r1 = random.Random(1)
a1 = heavy(r1, N)
a2 = heavy(r1, N)
a3 = heavy(r1, N)
r2 = random.Random(2)
b1 = heavy(r2, N)
b2 = heavy(r2, N)
b3 = heavy(r2, N)
c = sum(x * x for x in range(N // 4))
print(round(a1 + a2 + a3, 6), round(b1 + b2 + b3, 6), c)
'''

COMPREHENSION = '''\
import math

ITEMS = list(range(200))


def fit(i):
    s = 0.0
    for k in range({k}):
        s += math.sin(i * k) ** 2
    return round(s, 6)


results = [fit(i) for i in ITEMS]
print(len(results), sum(results), results[:3])
'''


SKEWED = '''\
def cost(i):
    s = 0
    for k in range({k} * i):
        s = (s * 31 + k) % 1000003
    return s


ITEMS = list(range(120))
out = [cost(i) for i in ITEMS]
print(sum(out))
'''


def generated_script(lines: int = 2000) -> str:
    """A serial script of about ``lines`` lines of varied top-level statements."""
    out = ["import os", "import math", "scale = 3", "",
           "def f(x):", "    return x * scale + 1", "",
           "def g(values):", "    return sum(f(v) for v in values)", ""]
    k = 0
    while len(out) < lines:
        out += [f"a{k} = [math.sqrt(i) for i in range({k % 50 + 1})]",
                f"b{k} = g(a{k})",
                f"c{k} = {{'k': b{k}, 'n': len(a{k})}}",
                f"c{k}['m'] = f(b{k})",
                f"print(k := {k}, round(b{k}, 3))",
                "for j in range(3):",
                f"    a{k}.append(j * scale)",
                f"with open(os.path.join('out', 'f{k % 10}.txt'), 'a') as fh:",
                f"    fh.write(str(c{k}))",
                f"scale = {k % 7 + 1}" if k % 25 == 0 else f"d{k} = f({k})"]
        k += 1
    return "\n".join(out[:lines]) + "\n"


def best_time(cmd: list[str], cwd: str, repeat: int, env: dict) -> tuple[float, str]:
    best, out = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env,
                              check=True)
        best = min(best, time.perf_counter() - t0)
        out = done.stdout
    return best, out


def paired_times(serial_cmd: list[str], parallel_cmd: list[str], cwd: str, repeat: int,
                 env: dict) -> tuple[list[float], list[float], str, str]:
    """``repeat`` rounds, each timing the serial command and then the parallel one, so that
    a slow spell of the machine (timings here move by 20-40%) falls on both sides of a
    round; the times of each, and the last outputs."""
    serial, parallel, out_s, out_p = [], [], "", ""
    for _ in range(repeat):
        t, out_s = best_time(serial_cmd, cwd, 1, env)
        serial.append(t)
        t, out_p = best_time(parallel_cmd, cwd, 1, env)
        parallel.append(t)
    return serial, parallel, out_s, out_p


def speedups(serial: list[float], parallel: list[float]) -> tuple[float, float]:
    """The best serial time over the best parallel one, and the median of the rounds'
    own ratios."""
    import statistics

    return (min(serial) / min(parallel),
            statistics.median(s / p for s, p in zip(serial, parallel, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60_000_000,
                        help="loop iterations of each heavy half (default 60000000)")
    parser.add_argument("--m", type=int, default=16,
                        help="sorts of 2M doubles in each half of the NumPy script (default 16)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="paired rounds (serial, then parallel) of each script (default 3)")
    parser.add_argument("--lines", type=int, default=2000,
                        help="lines of the generated script to analyse (default 2000)")
    args = parser.parse_args()
    for name in ("n", "m", "repeat", "lines"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    sys.path.insert(0, ROOT)
    from tilegraph.autopar import analyze

    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # as on a user's machine, Python keeps the compiled modules it imports: a sandbox that
    # sets PYTHONDONTWRITEBYTECODE would charge every run the compilation of tilegraph
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "halves.py")
        with open(script, "w") as f:
            f.write(HEAVY.format(n=args.n))
        s_times, p_times, out_serial, out_par = paired_times(
            [sys.executable, script],
            [sys.executable, "-m", "tilegraph.cli", "autopar", script, "--workers", "2"],
            tmp, args.repeat, env)
        serial, parallel = min(s_times), min(p_times)
        halves_median = speedups(s_times, p_times)[1]
        if out_par != out_serial:
            print("autopar output differs from the serial output", file=sys.stderr)
            return 1
        np_script = os.path.join(tmp, "numpy_halves.py")
        with open(np_script, "w") as f:
            f.write(HEAVY_NUMPY.format(m=args.m))
        np_serial, np_out = best_time([sys.executable, np_script], tmp, args.repeat, env)
        np_parallel, np_out_par = best_time(
            [sys.executable, "-m", "tilegraph.cli", "autopar", np_script, "--workers", "2"],
            tmp, args.repeat, env)
        if np_out_par != np_out:
            print("autopar output of the NumPy script differs from the serial output",
                  file=sys.stderr)
            return 1
        import io

        from tilegraph.autopar.runner import run_script

        inproc = float("inf")
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            for _ in range(args.repeat):
                buf = io.StringIO()
                t0 = time.perf_counter()
                run_script(script, 2, stdout=buf)
                inproc = min(inproc, time.perf_counter() - t0)
                if buf.getvalue() != out_serial:
                    print("run_script output differs from the serial output", file=sys.stderr)
                    return 1
        finally:
            os.chdir(cwd)
        source = generated_script(args.lines)
        t0 = time.perf_counter()
        graph = analyze(source)
        first = time.perf_counter() - t0
        times = [first]
        for _ in range(args.repeat - 1):
            t0 = time.perf_counter()
            analyze(source)
            times.append(time.perf_counter() - t0)
        extra = _more_workloads(tmp, args, env)
    speedup = serial / parallel
    analysis = min(times)
    print(f"two heavy halves, {args.n} iterations each (best of {args.repeat} rounds, "
          f"{os.cpu_count()} cores):")
    print(f"  python script.py                      {serial:8.3f} s")
    print(f"  tilegraph autopar script.py -w 2      {parallel:8.3f} s")
    print(f"  speed-up on 2 workers                 {speedup:8.2f}x   best/best, "
          f"{halves_median:.2f}x median of {args.repeat} paired rounds (goal >= 1.5x)")
    print(f"  run_script(script, 2) in-process      {inproc:8.3f} s   "
          f"({serial / inproc:.2f}x; no interpreter start or import)")
    print(f"two NumPy halves, {args.m} sorts of 2M doubles each (NumPy releases the GIL):")
    print(f"  python script.py                      {np_serial:8.3f} s")
    print(f"  tilegraph autopar script.py -w 2      {np_parallel:8.3f} s")
    print(f"  speed-up on 2 workers                 {np_serial / np_parallel:8.2f}x   "
          "(goal >= 1.5x)")
    print(f"analysis of a {args.lines}-line script ({len(graph.tasks)} tasks, "
          f"{len(graph.edges)} edges):")
    print(f"  analyze()                             {analysis:8.3f} s   (goal <= 1 s; "
          f"first call {first:.3f} s)")
    print("\n".join(extra))
    return 0


def _in_process(script: str, repeat: int, want: str) -> float:
    import io

    from tilegraph.autopar.runner import run_script

    best = float("inf")
    for _ in range(repeat):
        buf = io.StringIO()
        t0 = time.perf_counter()
        run_script(script, 2, stdout=buf)
        best = min(best, time.perf_counter() - t0)
        if buf.getvalue() != want:
            raise SystemExit(f"run_script output of {script} differs from the serial one")
    return best


STARTUP = '''\
import time
t = time.perf_counter()
u = len(str(time))
print(repr(t), u)
'''


def _startup(tmp: str, runs: int = 20) -> str:
    """The start-up of a parallel run: from ``run_script``'s call to the first statement's
    start on a worker (the statement reads ``perf_counter``), median of ``runs``."""
    import io
    import statistics

    from tilegraph.autopar import analyze
    from tilegraph.autopar.runner import run_script

    script = os.path.join(tmp, "startup.py")
    with open(script, "w") as f:
        f.write(STARTUP)
    graph = analyze(script)
    lags = []
    for _ in range(runs):
        buf = io.StringIO()
        t0 = time.perf_counter()
        run_script(script, 2, stdout=buf, graph=graph)
        lags.append(float(buf.getvalue().split()[0]) - t0)
    return (f"start-up of a run on 2 workers: the first statement starts "
            f"{statistics.median(lags) * 1e3:.0f} ms after run_script() (median of {runs}; "
            f"min {min(lags) * 1e3:.0f} ms)")


def _more_workloads(tmp: str, args: argparse.Namespace, env: dict) -> list[str]:
    """The chains, comprehension and state workloads; their report lines."""
    from tilegraph.autopar import analyze
    from tilegraph.autopar.explain import simulate_workers
    from tilegraph.autopar.runner import profile_script

    lines = []
    cli = [sys.executable, "-m", "tilegraph.cli", "autopar"]

    def paired(name: str, source: str, what: str) -> tuple[str, str, list[float], list[float],
                                                            str]:
        """Write the script, time it in paired rounds; its path, its times and output."""
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(source)
        s_times, p_times, want, got = paired_times([sys.executable, path],
                                                   [*cli, path, "--workers", "2"], tmp,
                                                   args.repeat, env)
        if got != want:
            raise SystemExit(f"autopar output of the {what} differs from the serial one")
        best, median = speedups(s_times, p_times)
        return path, (f"  python script.py                      {min(s_times):8.3f} s\n"
                      f"  tilegraph autopar script.py -w 2      {min(p_times):8.3f} s   "
                      f"{best:.2f}x best/best, {median:.2f}x median of {args.repeat} paired "
                      "rounds"), s_times, p_times, want

    chains, timed, _, _, want = paired("chains.py", CHAINS.format(n=max(1, args.n // 10)),
                                       "chains script")
    inproc = _in_process(chains, args.repeat, want)
    graph = analyze(chains)
    prof = profile_script(graph)
    rows = {p: secs for p, secs, _ in simulate_workers(graph, prof.seconds, prof.nbytes)}
    simulated = rows[1] / rows[2]
    measured = prof.total / inproc
    lines += [f"two chains over seeded random.Random objects, a shared constant, "
              f"N={args.n // 10}:", timed + " (goal >= 1.6x)",
              f"  run_script(script, 2) in-process      {inproc:8.3f} s   {measured:.2f}x of "
              f"the statements' {prof.total:.3f} s; simulated {simulated:.2f}x "
              f"(goal: within 15%, {abs(measured / simulated - 1) * 100:.0f}% off)"]
    comp, timed, s_times, _, want = paired(
        "comprehension.py", COMPREHENSION.format(k=max(1, args.n // 500)), "comprehension")
    inproc = _in_process(comp, args.repeat, want)
    lines += [f"one comprehension over 200 items ({min(s_times) / 200 * 1e3:.0f} ms each):",
              timed + " (goal >= 1.7x)",
              f"  run_script(script, 2) in-process      {inproc:8.3f} s"]
    _, timed, _, _, _ = paired("skewed.py", SKEWED.format(k=max(1, args.n // 7500)),
                               "skewed comprehension")
    lines += ["one comprehension over 120 items whose cost grows with the item (the last "
              "half costs 3x the first):", timed + " (equal halves could not pass 1.33x)"]
    corpus = os.path.join(ROOT, "tests", "autopar", "corpus", "state")
    same = runs = 0
    differ = []
    for name in sorted(os.listdir(corpus)):
        script = os.path.join(corpus, name)
        ref = subprocess.run([sys.executable, script], cwd=tmp, capture_output=True, env=env)
        for workers in (1, 2, 4):
            got = subprocess.run([*cli, script, "--workers", str(workers)], cwd=tmp,
                                 capture_output=True, env=env)
            runs += 1
            if (got.returncode, got.stdout, got.stderr) == \
                    (ref.returncode, ref.stdout, ref.stderr):
                same += 1
            else:
                differ.append(f"{name} at {workers}")
    lines.append(_startup(tmp))
    lines += [f"process state corpus ({runs // 3} scripts at 1, 2, 4 workers): identical "
              f"output, errors and status {same} of {runs} (goal {runs} of {runs})"
              + (f"; different: {', '.join(differ)}" if differ else "")]
    return lines


if __name__ == "__main__":
    sys.exit(main())
