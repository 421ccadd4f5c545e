"""The processes backend of autopar: a program's steps run on forked worker processes, each
holding a namespace. It is a :class:`~tilegraph.runtime.backends.Backend` object that the
front end hands to the pipeline (``backend=``); the runtime does not know it.

Some programs are not functions of their inputs but steps over shared variables: the
top-level statements of a script. A front end lowers such a program to a TaskGraph whose
tasks' operations are :class:`CodeStep` objects (compiled code, the names it reads and
writes, its position in the program), with a ``serial`` column of those positions (see
:func:`tilegraph.autopar.runner.script_taskgraph` for scripts). The graph is planned and
run by the one pipeline like any other: the executor core keeps the task states, the
priorities, the events (progress, the HTML report) and the failure rule of programs with
side effects (a step that raises stops the run as the program run in order stops: nothing
after it starts, everything before it finishes). :class:`ProcessesBackend` is only the seam
below it: it drives ``Execution.worker_loop`` on one thread per worker process, with a
``call`` that runs the step in a process. A run's processes and state are its own
(:class:`StepsPartition`, made by ``partition``): one backend object runs any number of
graphs, one after the other or at once, and keeps nothing of them. When a run ends, its
subscribers get a :class:`StepsDone` event (steps per process, values moved and their
bytes).

Each worker process is forked when the run starts, from this process once it has imported
tilegraph and NumPy and threadpoolctl has found the BLAS libraries (a worker imports and
scans nothing before its first step: it only limits its BLAS threads), and holds a
namespace: a module named ``__main__``, registered as such in its ``sys.modules``, so that
the program's functions and classes pickle by reference. Its ``__file__`` is the program's
file name, and tracebacks are cut to the frames of that file (what ``python script.py``
prints).

Run state (of each run, :class:`_StepRun`; guarded by its ``cond``):

========================  ===============================================================
field                     meaning
========================  ===============================================================
``owner[v]``              process holding the current value of variable ``v``
``holders[v]``            processes holding a copy of the current value (``owner``
                          included); a process never holds an out-of-date value
``nbytes[v]``             size of ``v`` measured where it was defined (for placement)
``touches[v]``            steps reading or writing ``v`` not finished yet; at 0, ``v`` is
                          freed on every process
``busy[w]``               step running (or being staged) on process ``w``, or ``None``
``group_worker[g]``       the process of group ``g`` once its first step was placed
``stuck[v]``              process of a value that cannot be pickled: its users run there
``results[i]``            captured (stdout, stderr, log file record) of a finished step,
                          until released in program order
``failed``                the earliest step that raised (its output is the last released)
========================  ===============================================================

The graph's dependencies must make this bookkeeping true: a step runs after the last step
before it that writes a name it reads, and before the next step that writes a name it reads
or writes (def-use, write-after-read and write-after-write edges). Placement happens when a
step starts, because only then are its inputs' sizes known, by the rule of its op kind
(``"at-start"``: :func:`tilegraph.plan.place.choose_on_start`): a step runs on its group's
process if it has one; the first step of a group goes to the process bound to the fewest
steps still to run of the groups already placed on it (waiting for it if it is busy), so
that independent chains run on different processes; any other step goes to the idle
process holding the most bytes of its inputs, unless a busy process holds much more.
Missing inputs are exported by their owners (pickle protocol 5, NumPy buffers out of band)
and loaded into it; of a variable a step needs only a part of (:class:`Part`: a chunk of a
split loop's items), the owner makes that part and sends it alone. Steps marked
``everywhere`` (imports, ``def``, ``class``, and settings of
the process state such as ``np.set_printoptions`` or ``logging.basicConfig``) run on every
process, after the values they read were sent to every process. ``os.chdir``,
``os.environ`` and ``sys.path`` are process state: after a step that may change them the
process reports them, and a step runs with the state its predecessors in program order
left. Standard output and error are captured per step and written in
program order; a step's ``sys.stdout`` and ``sys.stderr`` are proxies to its buffers, so a
stream kept by an earlier step (a logging handler) writes into the later step's output.
Files written by ``logging.FileHandler`` (``logging.basicConfig(filename=...)``) are
captured the same way (:mod:`tilegraph.autopar.worker`): a worker's handler writes into the step's
record, and this process opens, truncates and appends to the file when it writes the step's
output, so the file's lines are in program order.
"""

from __future__ import annotations

import locale
import multiprocessing
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilegraph.autopar.channel import Channel
from tilegraph.autopar.steps import STATE_PARTS, CodeStep, Part, ScriptError, ScriptExit
from tilegraph.autopar.worker import worker_main, write_logs
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.plan.place import start_rule
from tilegraph.runtime.backends import PARALLEL, Backend, Execution, Partition
from tilegraph.runtime.blas import blas_controller
from tilegraph.runtime.events import Event
from tilegraph.util import cores


class _Cancelled(Exception):
    """The run ended while a step waited for a process (never seen by the user: the
    executor marks the task cancelled)."""


class ProcessesBackend(Backend):
    """Runs a graph of :class:`CodeStep` tasks on ``workers`` forked worker processes (see
    the module docstring). ``filename``: the program's file (its namespace's ``__file__``,
    the file whose frames tracebacks keep); ``argv``: its ``sys.argv``; ``directory``: put
    first on the workers' ``sys.path`` (a script's directory); ``out`` and ``err``: where
    the steps' standard output and error go, in program order; ``stdin``: give the worker
    processes this process's standard input, for the steps marked ``stdin`` (else a
    step that reads it fails with an error that says so). Each run forks its own worker
    processes and keeps its own state (:class:`StepsPartition`); the backend object holds
    only these settings."""

    name = "processes"
    processes = 1   # one executor; steps are placed on processes when they start

    def __init__(self, workers: int, *, filename: str, argv: list[str] | None = None,
                 directory: str | None = None, out: Any = None, err: Any = None,
                 stdin: bool = False):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if not isinstance(stdin, bool):
            raise TypeError(f"stdin must be True or False, got {stdin!r}")
        if sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("the processes backend needs the 'fork' start method "
                               "(Linux, macOS)")
        self.workers = workers
        self.path = filename
        self.argv = list(argv) if argv is not None else [filename]
        self.directory = directory
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.stdin = stdin

    # -- the seam ---------------------------------------------------------------------------

    def task_policy(self, graph: TaskGraph, seconds: Any) -> bytearray | None:
        # every step runs in a process (the driving thread only waits): always worth a
        # worker of its own
        return bytearray([PARALLEL]) * len(graph)

    def partition(self, graph: TaskGraph, outputs: Any, priority: Any) -> StepsPartition:
        """All of ``graph`` (one executor), with the run's own state (its steps in program
        order, checked: ``CodeStep`` tasks only, one per program position)."""
        return StepsPartition(graph, [int(o) for o in outputs], priority,
                              steps=_StepRun(self, graph))

    def run(self, part: Partition, execution: Execution) -> None:
        if not isinstance(part, StepsPartition):
            raise TypeError(f"the processes backend runs the StepsPartition its partition() "
                            f"made, got {type(part).__name__}")
        part.steps.run(execution)


@dataclass(frozen=True, slots=True)
class StepsDone(Event):
    """A run of the processes backend ended (sent to the run's subscribers once its worker
    processes are gone, whatever happened): ``tasks_per_worker``, the steps each worker
    process ran (steps run on every process not counted); ``transfers``, the values moved
    between processes; ``bytes_moved``, their bytes; ``bytes_received``, the bytes loaded
    into each process."""

    tasks_per_worker: tuple[int, ...]
    transfers: int
    bytes_moved: int
    bytes_received: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class StepsPartition(Partition):
    """A run of the processes backend (:meth:`ProcessesBackend.partition`): all of the
    graph, and ``steps``, the run's own state and worker processes (:class:`_StepRun`)."""

    steps: _StepRun


class _StepRun:
    """One run of a graph of steps: its worker processes and the state of the module
    docstring (guarded by ``cond``), made for the run and dropped with it. It runs once."""

    def __init__(self, backend: ProcessesBackend, graph: TaskGraph):
        self.workers = workers = backend.workers
        self.path = backend.path
        self.argv = backend.argv
        self.directory = backend.directory
        self.out = backend.out
        self.err = backend.err
        self.stdin = backend.stdin
        self.cond = threading.Condition(threading.Lock())
        self.steps: dict[int, CodeStep] = {}
        self.owner: dict[str, int] = {}
        self.holders: dict[str, set[int]] = defaultdict(set)
        self.nbytes: dict[str, int] = {}
        self.everywhere_names: set[str] = set()
        self.touches: dict[str, int] = defaultdict(int)
        self.touch_set: dict[int, set[str]] = {}
        self.busy: list[int | None] = [None] * workers
        self.group_worker: dict[int, int] = {}
        self.group_left: dict[int, int] = defaultdict(int)   # steps of a group still to run
        self.stuck: dict[str, int] = {}
        self.results: dict[int, tuple[str, str, list]] = {}
        self.order: list[int] = []
        self.next_release = 0
        self.failed: int | None = None
        # part of the process state -> [(step, value)] of the finished steps that set it
        self.state_writers: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        self.worker_state: list[dict[str, int]] = [dict.fromkeys(STATE_PARTS, -1)
                                                   for _ in range(workers)]
        self.ran_on = [0] * workers
        self.transfers = 0
        self.bytes_moved = 0
        self.bytes_in = [0] * workers   # bytes of values loaded into each process
        self.channels: list[Channel] = []
        self.closing = False
        self.lost: BaseException | None = None
        self.execution: Execution | None = None
        self.used = False
        self._slot = threading.local()
        self._place = start_rule("statement")   # the process of a step, when it starts
        self._take_steps(graph)

    def _take_steps(self, graph: TaskGraph) -> None:
        """The graph's steps, in program order, and who touches which name."""
        for i, func in enumerate(graph.funcs):
            if not isinstance(func, CodeStep):
                raise TypeError(f"the processes backend runs CodeStep tasks only; task "
                                f"{graph.keys[i]!r} is {func!r}")
        steps = sorted(graph.funcs, key=lambda f: f.index)
        self.steps = {f.index: f for f in steps}
        if len(self.steps) != len(steps):
            twice = sorted({f.index for f in steps if sum(g.index == f.index
                                                          for g in steps) > 1})
            raise ValueError(f"the processes backend needs one CodeStep per program "
                             f"position; positions {twice} have several")
        self.order = [f.index for f in steps]
        seen: set[str] = set()
        for f in steps:
            names = set(f.reads | f.writes)
            if f.reads_all:   # it may read anything defined before it
                names |= seen
            seen |= f.writes
            if f.group is not None:
                self.group_left[f.group] += 1
            if f.everywhere:   # its writes exist everywhere; its reads are sent everywhere
                self.everywhere_names |= f.writes
                names = set(f.reads)
            self.touch_set[f.index] = names
            for v in names:
                self.touches[v] += 1

    def run(self, execution: Execution) -> None:
        """Fork the worker processes and drive the run on them (see the module
        docstring); the run's subscribers get :class:`StepsDone` at the end."""
        if self.used:
            raise RuntimeError("a run of the processes backend runs once; partition the "
                               "graph again")
        self.used = True
        self.execution = execution
        threads: list[threading.Thread] = []
        try:
            self._start()
            for w in range(self.workers):
                t = threading.Thread(target=self._drive, args=(execution, w), daemon=True,
                                     name=f"tilegraph-step-driver-{w}")
                t.start()
                threads.append(t)
            while not execution.done_event.wait(0.05):   # Ctrl-C seen in 50 ms
                pass
        except BaseException as exc:
            execution.cancel(exc)
            raise
        finally:
            self._shutdown(graceful=execution.status == "done")
            for t in threads:
                while t.is_alive():
                    try:
                        t.join()
                    except KeyboardInterrupt:   # the run is already cancelled
                        execution.cancel(KeyboardInterrupt())
            execution.finish_io()
            if execution.emitting:
                with execution.lock:
                    execution.send(StepsDone(tuple(self.ran_on), self.transfers,
                                             self.bytes_moved, tuple(self.bytes_in)))

    def _drive(self, execution: Execution, w: int) -> None:
        self._slot.w = w   # so that the report's worker w is mostly process w
        try:
            execution.worker_loop(w, call=self._call)
        except BaseException as exc:
            execution.cancel(exc)

    # -- processes ----------------------------------------------------------------------------

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        codes = {i: f.code for i, f in self.steps.items()}
        saved_path = list(sys.path)
        if self.directory is not None:
            sys.path.insert(0, self.directory)
        sys.stdout.flush()
        sys.stderr.flush()
        controller = blas_controller()   # scanned once here, inherited by every worker
        stdin = _stdin_source() if self.stdin else None
        try:
            for w in range(self.workers):
                parent, child = ctx.Pipe(duplex=True)
                p = ctx.Process(target=worker_main,
                                args=(child, codes, self.path, self.argv,
                                      max(1, cores() // self.workers), controller, stdin),
                                daemon=True, name=f"tilegraph-step-worker-{w}")
                p.start()
                child.close()
                self.channels.append(Channel(w, parent, p, self._lost))
        finally:
            sys.path[:] = saved_path
            if stdin is not None:   # the workers hold it now
                os.close(stdin[0])

    def _lost(self, w: int) -> BaseException:
        """Process ``w`` is gone (its pipe closed): unless we are stopping it, the values it
        held are lost, so the run stops now."""
        with self.cond:
            if self.closing:
                return _Cancelled("the run is over")
        proc = self.channels[w].proc
        proc.join(timeout=5.0)   # for its exit code (it is dead: this returns at once)
        with self.cond:
            i = self.busy[w]
            line = self.steps[i].lineno if i is not None else None
            error = ScriptError(f"worker process {w} died (exit code {proc.exitcode})"
                                + (f" while running line {line}\n" if line else "\n"),
                                self.path, line)
            if self.lost is None:
                self.lost = error
            self.cond.notify_all()
        if self.execution is not None:
            self.execution.cancel(error)
        return error

    def _shutdown(self, graceful: bool) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        for ch in self.channels:
            ch.close()
        for ch in self.channels:
            ch.proc.join(timeout=2 if graceful else 0.05)
        for ch in self.channels:
            if ch.proc.is_alive():
                ch.proc.terminate()
                ch.proc.join(timeout=2)
            if ch.proc.is_alive():
                ch.proc.kill()
                ch.proc.join()
        for ch in self.channels:
            ch.join(timeout=2)
            ch.conn.close()

    # -- one step -----------------------------------------------------------------------------

    def _call(self, func: Callable, args: Any, kwargs: Any) -> None:
        """Run step ``func.index`` on a process (the executor's ``call``)."""
        if not isinstance(func, CodeStep):
            raise TypeError(f"the processes backend runs CodeStep tasks only, not {func!r}")
        i = func.index
        if func.everywhere:
            return self._replicate(i)
        w = self._stage(i)
        t = func
        ch = self.channels[w]
        with self.cond:
            self._post_state(i, w)
        reply = ch.request("run", i, sorted(t.writes), list(t.changes), t.reads_all,
                           t.stdin, inline=True)
        (out, err, defined, state, error, logs), _ = reply.result()
        with self.cond:
            self.busy[w] = None
            self.ran_on[w] += 1
            if t.group is not None:
                self.group_left[t.group] -= 1
            self.cond.notify_all()
            if state is not None:
                for part, value in state.items():
                    self.state_writers[part].append((i, value))
                    self.worker_state[w][part] = i
            self.results[i] = (out, err, logs)
            if error is not None:
                if self.failed is None or i < self.failed:
                    self.failed = i
                self._release()
                raise _script_exception(error)
            self._defined(i, w, defined)
            self._release()
        return None

    def _replicate(self, i: int) -> None:
        """Run step ``i`` (imports, ``def``, ``class``, settings of the process state) on
        every process, once the values it reads are on every process and each process has
        the state the steps before it left; the output of the first one is the step's."""
        t = self.steps[i]
        for w in range(self.workers):
            with self.cond:
                names = sorted(v for v in t.reads if v in self.owner
                               and v not in self.everywhere_names)
                missing: dict[int, list[str]] = defaultdict(list)
                for v in names:
                    if w not in self.holders[v]:
                        missing[self.owner[v]].append(v)
                self._post_state(i, w)
            stuck = self._move(w, missing)
            if stuck:
                held = ", ".join(f"{v!r} (worker {src})" for v, src in stuck.items())
                raise ScriptError(f"{t.label} of {self.path} sets process state on every "
                                  f"worker but reads values that cannot be pickled: {held}; "
                                  "run it with --workers 1\n", self.path, t.lineno)
        replies = [ch.request("run", i, [], [], False, inline=True) for ch in self.channels]
        answers = [r.result()[0] for r in replies]
        out, err, _, _, _, logs = answers[0]
        error = next((a[4] for a in answers if a[4] is not None), None)
        with self.cond:
            self.results[i] = (out, err, logs)
            if error is not None and (self.failed is None or i < self.failed):
                self.failed = i
            else:
                self._free_touched(i, defaultdict(list))
            self._release()
        if error is not None:
            raise _script_exception(error)

    def _post_state(self, i: int, w: int) -> None:
        """Give process ``w`` the process state (``STATE_PARTS``) that the steps before
        ``i`` in program order left (called with ``cond``)."""
        ch = self.channels[w]
        for part in STATE_PARTS:
            j, value = self._state_for(i, part)
            if j != self.worker_state[w][part] and value is not None:
                ch.post(("state", None, part, value))
                self.worker_state[w][part] = j

    def _stage(self, i: int) -> int:
        """Choose the process of step ``i`` and move its missing inputs there; the
        process is marked busy with ``i``."""
        t = self.steps[i]
        while True:
            with self.cond:
                names = self._inputs(i)
                w = self._choose(i, names)
                self.busy[w] = i
                if t.group is not None:
                    self.group_worker.setdefault(t.group, w)
                missing: dict[int, list[str]] = defaultdict(list)
                part = None
                for v in names:
                    if w in self.holders[v]:
                        continue
                    if t.part is not None and v == t.part.source:
                        part = (self.owner[v], t.part)   # only its part is sent
                    else:
                        missing[self.owner[v]].append(v)
            try:
                stuck = self._move(w, missing, part)
            except BaseException:
                with self.cond:
                    self.busy[w] = None
                    self.cond.notify_all()
                raise
            if not stuck:
                return w
            with self.cond:   # run it where the value that cannot be pickled is
                self.stuck.update(stuck)
                self.busy[w] = None
                if t.part is not None:   # a part sent already is not needed there
                    self.channels[w].post(("free", None, [t.part.name]))
                self.cond.notify_all()

    def _move(self, w: int, missing: dict[int, list[str]],
              part: tuple[int, Part] | None = None) -> dict[str, int]:
        """Copy the variables ``missing[src]`` from each ``src`` to process ``w``, and
        ``part = (src, Part)``'s part made on ``src`` (``w`` does not become a holder of its
        source); the variables that cannot be pickled (and their process) if any."""
        exports = [(src, vs, self.channels[src].request("export", vs, inline=True))
                   for src, vs in missing.items()]
        if part is not None:
            src, p = part
            exports.append((src, [], self.channels[src].request(
                "export_part", tuple(p), inline=True)))
        stuck: dict[str, int] = {}
        loads = []
        for src, names, fut in exports:
            bad, frames = fut.result()
            if bad:
                stuck.update(dict.fromkeys(bad, src))
                continue
            loads.append((names, frames, self.channels[w].request("load", frames=frames)))
        for names, frames, fut in loads:
            problem, _ = fut.result()
            if problem is not None:
                raise ScriptError(f"a value could not be moved to worker {w}: {problem}\n",
                                  self.path, None)
            with self.cond:
                self.transfers += max(1, len(names))
                self.bytes_moved += sum(len(f) for f in frames)
                self.bytes_in[w] += sum(len(f) for f in frames)
                for v in names:
                    self.holders[v].add(w)
        return stuck

    def _choose(self, i: int, names: list[str]) -> int:
        """The process step ``i`` runs on, once it is idle (called with ``cond``)."""
        t = self.steps[i]
        while True:
            if self.lost is not None:
                raise self.lost
            if self.closing or self.execution.finished:
                raise _Cancelled("the run is over")
            need = {self.stuck[v] for v in names if v in self.stuck}
            if t.group is not None and t.group in self.group_worker:
                need.add(self.group_worker[t.group])
            if len(need) > 1:
                held = ", ".join(f"{v!r} (worker {self.stuck[v]})" for v in names
                                 if v in self.stuck)
                raise ScriptError(f"{t.label} of {self.path} needs values that cannot "
                                  f"be pickled on different workers: {held}; run it with "
                                  "--workers 1\n", self.path, t.lineno)
            if need:
                w = need.pop()
                if self.busy[w] is None:
                    return w
            else:
                idle = [w for w in range(self.workers) if self.busy[w] is None]
                if idle:
                    w = self._place(idle, [self._local_bytes(t, names, w)
                                           for w in range(self.workers)],
                                    self._committed(), first_of_group=t.group is not None,
                                    own=getattr(self._slot, "w", -1))
                    if w is not None:
                        return w
            self.cond.wait(0.5)

    def _committed(self) -> list[int]:
        """Per process, the steps still to run of the groups placed on it: the work it is
        bound to (a group's steps all run where its first one ran), which a new group's
        first step avoids, so that independent chains land on different processes."""
        load = [0] * self.workers
        for g, w in self.group_worker.items():
            load[w] += self.group_left[g]
        return load

    def _inputs(self, i: int) -> list[str]:
        t = self.steps[i]
        if t.reads_all:
            return sorted(self.owner)
        return sorted(v for v in t.reads | t.writes if v in self.owner
                      and v not in self.everywhere_names)

    def _local_bytes(self, t: CodeStep, names: list[str], w: int) -> int:
        """The bytes of ``names`` that need not move if step ``t`` runs on ``w`` (of a
        variable it needs a part of, that part's share)."""
        total = 0
        for v in names:
            if w in self.holders[v]:
                size = self.nbytes.get(v, 0)
                total += int(size * t.part.share) if t.part is not None and \
                    v == t.part.source else size
        return total

    def _state_for(self, i: int, part: str) -> tuple[int, Any]:
        """The value of a part of the process state that the last finished step before
        ``i`` in program order left (``-1``: the state the processes started with)."""
        best: tuple[int, Any] = (-1, None)
        for j, value in self.state_writers[part]:
            if best[0] < j < i:
                best = (j, value)
        return best

    def _defined(self, i: int, w: int, defined: dict[str, int | None]) -> None:
        """Step ``i`` finished on ``w`` defining ``defined`` (name -> size, ``None``:
        deleted): record where the values are and free those no step needs any more."""
        stale: dict[int, list[str]] = defaultdict(list)
        for v, size in defined.items():
            for h in self.holders[v] - {w}:
                stale[h].append(v)
            if size is None:
                self.owner.pop(v, None)
                self.holders[v] = set()
            else:
                self.owner[v] = w
                self.holders[v] = {w}
                self.nbytes[v] = size
        if self.steps[i].reads_all:
            for v in list(self.owner):
                if v not in defined:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        self._free_touched(i, stale)

    def _free_touched(self, i: int, stale: dict[int, list[str]]) -> None:
        """Step ``i`` is done with its names: free those no later step touches, and the
        ``stale`` copies (process -> names) everywhere (called with ``cond``)."""
        for v in self.touch_set[i]:
            if v in self.touches:
                self.touches[v] -= 1
                if self.touches[v] == 0 and v in self.owner:
                    for h in self.holders[v]:
                        stale[h].append(v)
                    self.owner.pop(v)
                    self.holders[v] = set()
        for h, vs in stale.items():
            self.channels[h].post(("free", None, sorted(set(vs))))

    def _release(self) -> None:
        """Write the captured output of finished steps, in program order, up to the
        earliest one that raised (called with ``cond``)."""
        order = self.order
        stop = self.failed if self.failed is not None else order[-1]
        while (self.next_release < len(order) and order[self.next_release] <= stop
               and order[self.next_release] in self.results):
            out, err, logs = self.results.pop(order[self.next_release])
            write_logs(logs)
            if out:
                self.out.write(out)
                self.out.flush()
            if err:
                self.err.write(err)
                self.err.flush()
            self.next_release += 1


def _stdin_source() -> tuple[int, str, str] | None:
    """A descriptor of this process's standard input (a copy, which the forked workers
    inherit), with the encoding and errors of ``sys.stdin`` as Python opened it; ``None``
    when it is closed."""
    try:
        fd = os.dup(0)
    except OSError:
        return None
    original = sys.__stdin__
    encoding = getattr(original, "encoding", None) or locale.getpreferredencoding(False)
    errors = getattr(original, "errors", None) or "strict"
    return fd, encoding, errors


def _script_exception(error: tuple) -> Exception:
    if error[0] == "exit":
        return ScriptExit(error[1], error[2])
    return ScriptError(error[1], error[2], error[3])
