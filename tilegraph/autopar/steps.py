"""The steps of a script as autopar's processes backend runs them: :class:`CodeStep` (a
top-level statement's compiled code and the names it reads and writes), :class:`Part` (the
chunk of a variable a split loop's step needs), and how a step that fails is reported as the
serial run reports it (:class:`ScriptError`, :class:`ScriptExit`)."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from types import CodeType
from typing import Any, NamedTuple

STATE_PARTS = ("cwd", "env", "path")


class ScriptError(Exception):
    """The program (a script) raised an exception: ``traceback`` is the text the serial run prints,
    ``filename``/``lineno`` the script's line that raised, ``exit_code`` the process
    status the serial run would end with."""

    def __init__(self, traceback_text: str, filename: str | None, lineno: int | None,
                 exit_code: int = 1):
        self.traceback = traceback_text
        self.filename = filename
        self.lineno = lineno
        self.exit_code = exit_code
        last = traceback_text.strip().splitlines()[-1] if traceback_text.strip() else ""
        super().__init__(f"{filename}, line {lineno}: {last}")


class ScriptExit(Exception):
    """The script called ``sys.exit``: the run stops with ``code`` (``message``: what
    ``sys.exit`` writes to standard error, e.g. for ``sys.exit("reason")``)."""

    def __init__(self, code: int, message: str = ""):
        self.code = code
        self.message = message
        super().__init__(f"the script exited with status {code}")


# -- reporting like the serial run ------------------------------------------------------------


def error_info(exc: BaseException, path: str) -> tuple[str, str | None, int | None]:
    """The traceback as the serial run prints it (frames from the script's first line on)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    if tb is None:
        tb = exc.__traceback__
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == path:
            line = lineno
    return text, path, line


def exit_status(exc: SystemExit) -> tuple[int, str]:
    """The status ``sys.exit(arg)`` ends the process with, and what it writes to stderr."""
    code = exc.code
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def value_size(value: Any) -> int:
    """A quick estimate of the bytes of a value (NumPy arrays exactly, containers sampled)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        size = sys.getsizeof(value)
    except TypeError:
        return 0
    if isinstance(value, (list, tuple, set, frozenset, dict)) and value:
        items = list(value.values() if isinstance(value, dict) else value)
        sample = items[:: max(1, len(items) // 64)][:64]
        size += int(sum(value_size(x) for x in sample) * len(items) / len(sample))
    return size


# -- the steps ---------------------------------------------------------------------------------


class Part(NamedTuple):
    """A step reads only a part of a variable (a chunk of the items of a loop split across
    processes): ``take(value)`` is that part, made by the process that holds ``source``
    and sent, alone, under ``name`` to the process that runs the step when that one does
    not hold ``source`` (the step's code then reads ``name`` if it is defined, else the
    part of ``source``, and removes ``name`` when done). ``take`` must pickle by reference
    (a function of a module, or a ``functools.partial`` of one); ``share`` is the part's
    expected fraction of ``source``'s bytes (for placement)."""

    source: str
    name: str
    take: Callable[[Any], Any]
    share: float


class CodeStep:
    """The operation of a task of :class:`ProcessesBackend`: ``code`` executed in a worker
    process's namespace. ``index``: the step's position in the program (the task's
    ``serial``); ``reads``: names it reads (or mutates); ``writes``: names it binds, deletes
    or mutates; ``label``/``lineno``: where it is in the program (for messages);
    ``everywhere``: it runs on every process (imports, ``def``, ``class``: what later steps
    need wherever they run); ``reads_all``: it may read and write any name (a barrier);
    ``group``: steps of one group run on one process; ``changes``: the parts of the process
    state it may change (``"cwd"``, ``"env"``, ``"path"``); ``part``: a :class:`Part` of a
    variable of ``reads`` that is all the step needs of it; ``stdin``: it reads the standard
    input (the graph runs such steps in program order on one process; any other step that
    reads it fails with an error that says so)."""

    __slots__ = ("changes", "code", "everywhere", "group", "index", "label", "lineno",
                 "part", "reads", "reads_all", "stdin", "writes")

    def __init__(self, index: int, code: CodeType, reads: frozenset[str] = frozenset(),
                 writes: frozenset[str] = frozenset(), *, label: str = "",
                 lineno: int | None = None, everywhere: bool = False,
                 reads_all: bool = False, group: int | None = None,
                 changes: tuple[str, ...] = (), part: Part | None = None,
                 stdin: bool = False):
        if not isinstance(code, CodeType):
            raise TypeError(f"CodeStep {index}: code must be a code object, got "
                            f"{type(code).__name__}")
        bad = [c for c in changes if c not in STATE_PARTS]
        if bad:
            raise ValueError(f"CodeStep {index}: changes must name parts of "
                             f"{STATE_PARTS}, got {bad}")
        self.index, self.code = index, code
        self.reads, self.writes = frozenset(reads), frozenset(writes)
        self.label = label or f"step {index}"
        self.lineno = lineno
        self.everywhere, self.reads_all, self.group = everywhere, reads_all, group
        self.changes = tuple(STATE_PARTS) if reads_all else tuple(changes)
        if part is not None and (part.source not in self.reads or everywhere or reads_all):
            raise ValueError(f"CodeStep {index}: a part must be of a variable it reads, on "
                             "a step that runs on one process and is not a barrier")
        if stdin and everywhere:
            raise ValueError(f"CodeStep {index}: a step that reads the standard input runs on "
                             "one process, not on every one")
        self.part = part
        self.stdin = bool(stdin)

    def __call__(self, *inputs: Any) -> Any:
        raise RuntimeError(f"{self.label} is a step of a program: it runs only on the worker "
                           "processes of a ProcessesBackend")

    def __repr__(self) -> str:
        return f"CodeStep({self.index}, {self.label!r})"
