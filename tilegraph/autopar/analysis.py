"""Static analysis of a serial Python script: its top-level statements as a task graph.

Nothing of the script runs: the analysis reads its ``ast``. Every top-level statement is a
task (a compound statement -- ``for``, ``while``, ``with``, ``if``, ``try``, ``def``,
``class`` -- is one task, analysed as a whole). For each task the analysis finds

- ``uses``: the global names it reads, including the globals read by the user-defined
  functions it calls or references (transitively), and the names it mutates;
- ``defines``: the global names it binds (assignment, ``import``, ``def``, ``for`` targets,
  ``del``, ``global`` writes inside called functions) or mutates;
- ``mutates``: names whose object it changes in place: a method call ``x.m(...)`` (unless
  ``m`` is a known read-only method such as ``mean`` or ``get``), ``x[k] = v``,
  ``x.a = v``, ``x += v``, ``del x[k]``, an ``out=`` argument, an argument of a known
  in-place function (``random.shuffle``) or of a user function that mutates its
  parameters; a mutation of ``x`` mutates every name that may alias it (``y = x``,
  ``y = x[0]``, ``y = f(x)``, ``x.append(y)``, ...);
- ``effects``: side effects on shared resources, each a class with a detail and a mode
  (read or write): ``output`` (print, ``sys.stdout``/``sys.stderr``, logging), ``file``
  (by path when the path is a literal, ``?`` when unknown), ``cwd`` (``os.chdir`` and
  relative paths), ``env`` (``os.environ``), ``random`` (the global ``random`` and
  ``numpy.random`` state), ``figure`` (matplotlib's current figure), ``import`` (imports
  and ``sys.path``), ``state`` (process-wide settings that later statements read without
  naming them: NumPy's print options and error handling, warning filters, matplotlib's
  and pandas' options, the recursion limit, the locale, the decimal context, the time
  zone, logging's configuration, an attribute of a module: :data:`STATE_CALLS`);
- ``barrier``: why the statement cannot be analysed (``exec``, ``eval``, ``globals()``,
  ``locals()``, a star import of a module that is not in the standard library, ``del``
  through an alias, an assignment to a module attribute, ``subprocess``...), or ``None``.
  A barrier is ordered after everything before it and before everything after it.

Edges go from an earlier task to a later one: ``def-use`` (read after write), ``anti``
(write after read), ``output`` (write after write), and one edge type per effect class
(writes are ordered with every earlier read or write of the same resource; reads of a
resource among themselves are not), and ``barrier``. A statement that sets process state
is a fence (``state`` edges): it runs after every statement before it and before every
statement after it, on every worker (the paper's preamble: the setting is made on each
process, so whatever later statement reads it sees it); one that cannot run on every
worker (it also writes files, draws random numbers, binds names) makes the whole script
run serially, as do threads, exit handlers, signal handlers and processes the script
starts itself (:attr:`ScriptGraph.serial_reason`).

Unsure means sequential: what the analysis does not understand adds edges, never removes
them.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

EDGE_TYPES = ("def-use", "anti", "output", "output-stream", "file", "cwd", "env", "random",
              "figure", "import", "state", "barrier")
"""Every edge type, in the order the explanation lists them. ``output-stream`` is the
effect class ``output`` (named apart from ``output``, the write-after-write edge)."""

_EFFECT_EDGE = {"output": "output-stream", "file": "file", "cwd": "cwd", "env": "env",
                "random": "random", "figure": "figure", "import": "import"}

_BUILTINS = frozenset(dir(builtins))

# Methods that do not change the object they are called on (str, list, dict, set, NumPy,
# pandas); any other method call on a name counts as a mutation of it.
PURE_METHODS = frozenset("""
all any argmax argmin argsort astype conj conjugate copy count cumprod cumsum decode
describe diagonal dot encode endswith find format get groupby head index isalnum isalpha
isdecimal isdigit islower isspace istitle isupper items join keys lower lstrip max mean
median min most_common nonzero partition prod ptp quantile ravel flatten replace reshape
rfind rindex round rpartition rsplit rstrip split splitlines startswith std strip sum
swapaxes swapcase tail title to_numpy tolist tobytes trace transpose upper values var
zfill isin unique nunique value_counts agg aggregate total_seconds isoformat strftime
hex bit_length as_integer_ratio is_integer union intersection difference
symmetric_difference issubset issuperset isdisjoint casefold expandtabs
""".split())

# Builtins whose result never aliases their arguments.
_FRESH_BUILTINS = frozenset("""
len sum abs round int float str bool repr hash isinstance issubclass ord chr range
format bin oct hex divmod pow callable id ascii complex bytes type print
""".split())

_BARRIER_BUILTINS = {
    "exec": "exec() runs code the analysis cannot see",
    "eval": "eval() runs code the analysis cannot see",
    "globals": "globals() exposes every variable",
    "locals": "locals() at top level exposes every variable",
    "vars": "vars() exposes every variable",
    "__import__": "__import__() imports a module chosen at run time",
    "input": "input() reads standard input",
    "breakpoint": "breakpoint() stops the program",
    "exit": "exit() ends the program",
    "quit": "quit() ends the program",
    "compile": "compile() makes code the analysis cannot see",
}

# Qualified-name prefixes -> barrier reason.
_BARRIER_CALLS = (
    ("subprocess.", "a subprocess writes to the terminal and files directly"),
    ("os.system", "a shell command writes to the terminal and files directly"),
    ("os.popen", "a shell command writes to the terminal and files directly"),
    ("os.fork", "os.fork() copies the process"),
    ("os.exec", "os.exec*() replaces the process"),
    ("os.spawn", "a child process writes to the terminal and files directly"),
    ("os.write", "os.write() writes to a file descriptor directly"),
    ("os._exit", "os._exit() ends the program"),
    ("sys.exit", "sys.exit() ends the program"),
    ("sys._getframe", "frame inspection exposes every variable"),
    ("inspect.", "frame inspection exposes every variable"),
    ("importlib.reload", "a module is reloaded"),
    ("importlib.import_module", "a module chosen at run time is imported"),
    ("multiprocessing.", "the script starts processes of its own"),
    ("threading.", "the script starts threads of its own"),
    ("concurrent.futures.", "the script starts workers of its own"),
    ("atexit.", "exit handlers run at the end of the program"),
    ("signal.", "signal handlers change the process"),
    ("builtins.", "the builtins module is changed"),
)

# Barrier reasons of what lives in one process and cannot be recreated on another: a script
# with any of them runs serially (its threads, exit handlers and children stay with it).
PROCESS_BOUND = frozenset({
    "os.fork() copies the process", "the script starts processes of its own",
    "the script starts threads of its own", "the script starts workers of its own",
    "exit handlers run at the end of the program", "signal handlers change the process",
})

STATE_CALLS = {
    "numpy.set_printoptions": "NumPy's print options",
    "numpy.seterr": "NumPy's floating-point error handling",
    "numpy.seterrcall": "NumPy's floating-point error handling",
    "warnings.filterwarnings": "the warning filters",
    "warnings.simplefilter": "the warning filters",
    "warnings.resetwarnings": "the warning filters",
    "matplotlib.rc": "matplotlib's settings", "matplotlib.rcdefaults": "matplotlib's settings",
    "matplotlib.rc_file": "matplotlib's settings", "matplotlib.style.use":
    "matplotlib's settings", "matplotlib.pyplot.rc": "matplotlib's settings",
    "matplotlib.pyplot.style.use": "matplotlib's settings", "matplotlib.rcParams.":
    "matplotlib's settings", "matplotlib.pyplot.rcParams.": "matplotlib's settings",
    "pandas.set_option": "pandas' options", "pandas.reset_option": "pandas' options",
    "pandas.options.": "pandas' options",
    "sys.setrecursionlimit": "the recursion limit",
    "sys.set_int_max_str_digits": "the integer string conversion limit",
    "sys.setswitchinterval": "the thread switch interval",
    "locale.setlocale": "the locale",
    "decimal.setcontext": "the decimal context", "decimal.getcontext": "the decimal context",
    "time.tzset": "the time zone",
    "logging.basicConfig": "logging's configuration", "logging.disable":
    "logging's configuration", "logging.captureWarnings": "logging's configuration",
    "logging.config.": "logging's configuration", "logging.root.": "logging's configuration",
    "gc.disable": "the garbage collector", "gc.enable": "the garbage collector",
    "gc.set_threshold": "the garbage collector", "gc.freeze": "the garbage collector",
    "os.umask": "the file mode mask", "socket.setdefaulttimeout": "the socket timeout",
    "numpy.set_string_function": "NumPy's print options",
}
"""Calls (qualified names; a trailing dot: every call below that name) that set process
state (the ``state`` effect class), with what they set. A method called on the result of
``logging.getLogger(...)`` or ``decimal.getcontext()``, and an assignment to an attribute
(or an item of an attribute) of a module, set state too."""

# methods of a logger (from logging.getLogger) that change logging's configuration
_LOGGER_SETTERS = frozenset({"setLevel", "addHandler", "removeHandler", "addFilter",
                             "removeFilter", "disabled", "propagate"})

_RANDOM_PURE = frozenset({"default_rng", "Generator", "RandomState", "SeedSequence", "PCG64",
                          "PCG64DXSM", "MT19937", "Philox", "SFC64", "BitGenerator",
                          "Random", "SystemRandom"})

# Functions (qualified) that change a positional argument in place: name -> argument index.
_INPLACE_ARG = {
    "random.shuffle": 0, "numpy.random.shuffle": 0, "heapq.heappush": 0,
    "heapq.heappop": 0, "heapq.heapify": 0, "heapq.heapreplace": 0, "heapq.heappushpop": 0,
    "bisect.insort": 0, "bisect.insort_left": 0, "bisect.insort_right": 0,
    "numpy.copyto": 0, "numpy.put": 0, "numpy.place": 0, "numpy.fill_diagonal": 0,
    "numpy.putmask": 0, "json.dump": 1, "pickle.dump": 1, "numpy.save": 0,
    "numpy.savetxt": 0, "numpy.savez": 0, "csv.writer": 0, "csv.DictWriter": 0,
}

# File functions (qualified): name -> (mode, argument index of the path or -1 for unknown).
_FILE_CALLS = {
    "numpy.load": ("r", 0), "numpy.loadtxt": ("r", 0), "numpy.genfromtxt": ("r", 0),
    "numpy.fromfile": ("r", 0), "numpy.save": ("w", 0), "numpy.savez": ("w", 0),
    "numpy.savez_compressed": ("w", 0), "numpy.savetxt": ("w", 0),
    "os.listdir": ("r", 0), "os.scandir": ("r", 0), "os.walk": ("r", 0),
    "glob.glob": ("r", -1), "glob.iglob": ("r", -1), "os.path.exists": ("r", 0),
    "os.path.isfile": ("r", 0), "os.path.isdir": ("r", 0), "os.path.getsize": ("r", 0),
    "os.path.getmtime": ("r", 0), "os.stat": ("r", 0), "os.remove": ("w", 0),
    "os.unlink": ("w", 0), "os.rename": ("w", -1), "os.replace": ("w", -1),
    "os.mkdir": ("w", 0), "os.makedirs": ("w", 0), "os.rmdir": ("w", 0),
    "os.removedirs": ("w", 0), "shutil.": ("w", -1), "tempfile.": ("w", -1),
    "matplotlib.pyplot.savefig": ("w", 0), "matplotlib.pyplot.imread": ("r", 0),
    "matplotlib.pyplot.imsave": ("w", 0), "pandas.read_": ("r", 0), "io.open": ("?", 0),
    "codecs.open": ("?", 0), "gzip.open": ("?", 0), "bz2.open": ("?", 0),
    "lzma.open": ("?", 0), "zipfile.ZipFile": ("?", 0), "tarfile.open": ("?", 0),
    "sqlite3.connect": ("w", 0), "pathlib.Path.cwd": ("r", -1),
}
_FILE_METHODS = {
    "to_csv": "w", "to_json": "w", "to_parquet": "w", "to_excel": "w", "to_pickle": "w",
    "to_hdf": "w", "to_feather": "w", "to_html": "w", "savefig": "w", "write_text": "w",
    "write_bytes": "w", "read_text": "r", "read_bytes": "r", "tofile": "w", "mkdir": "w",
    "unlink": "w", "rmdir": "w", "touch": "w", "rename": "w", "replace": "w", "exists": "r",
    "is_file": "r", "is_dir": "r", "iterdir": "r", "glob": "r", "rglob": "r", "stat": "r",
}
# Methods of the builtin containers and files that change their object: a method of the
# script's own classes with one of these names is never taken as read-only.
_KNOWN_MUTATORS = frozenset("""
append extend insert remove pop clear update add discard sort reverse setdefault popitem
write writelines fill resize put close flush seek truncate send throw
""".split())

# Builtins that return iterators.
_ITERATOR_CALLS = frozenset({"iter", "map", "filter", "zip", "enumerate", "reversed"})
# Calls whose result cannot be moved between processes: their variables stay on one worker.
_UNPICKLABLE_CALLS = frozenset({
    "open", "iter", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open",
    "zipfile.ZipFile", "tarfile.open", "sqlite3.connect", "socket.socket", "csv.reader",
    "csv.writer", "csv.DictReader", "csv.DictWriter", "tempfile.TemporaryFile",
    "tempfile.NamedTemporaryFile", "threading.Lock", "threading.RLock",
})


class AnalysisError(ValueError):
    """The script cannot be analysed (it does not exist or is not valid Python)."""


@dataclass(frozen=True)
class Effect:
    """A side effect on a shared resource: ``kind`` is the class (``output``, ``file``,
    ``cwd``, ``env``, ``random``, ``figure``, ``import``), ``detail`` names the resource
    within it (a file's path, ``?`` for an unknown path) and ``mode`` is ``"r"`` or ``"w"``."""

    kind: str
    detail: str
    mode: str


@dataclass(frozen=True)
class Task:
    """One top-level statement of the script."""

    index: int
    lineno: int
    end_lineno: int
    source: str
    uses: frozenset[str]
    defines: frozenset[str]
    mutates: frozenset[str]
    effects: tuple[Effect, ...]
    barrier: str | None = None
    group: int | None = None
    """Tasks with the same group run on the same worker (shared state such as the global
    random generator or the current figure, values that cannot be pickled, aliases that
    are mutated); the group is named by its first task's index."""
    replicated: bool = False
    """An import, ``def`` or ``class`` that depends on nothing but other such statements:
    every worker runs it, so functions, classes and modules never move."""
    loop: str | None = None
    """For a map over items (``x = [f(v) for v in items]``, a dict comprehension,
    ``x = list(map(f, items))``, a ``for`` loop that only appends to lists or sets dict
    entries): ``"split"`` when its iterations may run in chunks on all the workers, else
    why not."""

    @property
    def label(self) -> str:
        """``line N`` or ``lines N-M``."""
        if self.end_lineno > self.lineno:
            return f"lines {self.lineno}-{self.end_lineno}"
        return f"line {self.lineno}"

    @property
    def headline(self) -> str:
        """The first line of the statement's source, shortened."""
        first = self.source.splitlines()[0] if self.source else ""
        return first if len(first) <= 60 else first[:57] + "..."


@dataclass(frozen=True)
class Edge:
    """An ordering between two tasks: ``src`` must finish before ``dst`` starts.
    ``type`` is one of :data:`EDGE_TYPES`; ``variable`` is the variable, or the resource of
    an effect (a path for ``file``), or the reason of a barrier."""

    src: int
    dst: int
    type: str
    variable: str


@dataclass
class ScriptGraph:
    """The task graph of a script: its tasks in program order and the edges between them."""

    path: str
    source: str
    tasks: list[Task]
    edges: list[Edge]
    group_reasons: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def serial_reason(self) -> str | None:
        """Why the script must run serially, in one process (``None``: it need not): it
        starts threads, processes or exit or signal handlers, which live in the process
        that made them, or it sets process state in a statement that cannot run on every
        worker."""
        for t in self.tasks:
            for reason in (t.barrier or "").split("; "):
                if reason in PROCESS_BOUND:
                    return f"{t.label}: {reason}"
            kinds = {e.kind for e in t.effects}
            if "state" in kinds and not t.replicated:
                what = sorted(e.detail for e in t.effects if e.kind == "state")[0]
                why = _replicable_state(t, kinds) or "it is kept on one worker"
                return f"{t.label} sets {what} and cannot run on every worker: {why}"
        return None

    def predecessors(self, *, skip: Iterable[str] = ()) -> list[set[int]]:
        """For every task, the tasks it waits for (edges of the types in ``skip`` left out)."""
        skip = set(skip)
        preds: list[set[int]] = [set() for _ in self.tasks]
        for e in self.edges:
            if e.type not in skip:
                preds[e.dst].add(e.src)
        return preds

    def critical_path(self, weights: list[float] | None = None) -> list[int]:
        """The longest chain of tasks (by ``weights``, one per task; default 1 each), as
        task indices in order. Edges of the ``output-stream`` class do not count: the runner
        captures each statement's output and prints it in program order anyway."""
        w = weights if weights is not None else [1.0] * len(self.tasks)
        best = [0.0] * len(self.tasks)
        prev: list[int | None] = [None] * len(self.tasks)
        preds = self.predecessors(skip=("output-stream",))
        for i in range(len(self.tasks)):
            top, arg = 0.0, None
            for p in sorted(preds[i]):
                if best[p] > top:
                    top, arg = best[p], p
            best[i] = top + w[i]
            prev[i] = arg
        if not self.tasks:
            return []
        end = max(range(len(self.tasks)), key=lambda i: (best[i], -i))
        chain = [end]
        while prev[chain[-1]] is not None:
            chain.append(prev[chain[-1]])  # type: ignore[arg-type]
        return chain[::-1]

    def edge_set(self) -> set[tuple[int, int, str, str]]:
        """The edges as ``(src line, dst line, type, variable)`` tuples, for comparisons."""
        return {(self.tasks[e.src].lineno, self.tasks[e.dst].lineno, e.type, e.variable)
                for e in self.edges}


# -- reading a script --------------------------------------------------------------------------


def load_script(path_or_source: str | os.PathLike) -> tuple[str, str]:
    """``(path, source)``: a path to an existing ``.py`` file is read; a string holding a
    newline (or not naming a file) is taken as source text, with path ``<script>``."""
    if isinstance(path_or_source, os.PathLike) or (
            isinstance(path_or_source, str) and "\n" not in path_or_source
            and path_or_source.endswith(".py")):
        path = os.fspath(path_or_source)
        if not os.path.isfile(path):
            raise AnalysisError(f"no such script: {path}")
        with open(path, "rb") as f:
            data = f.read()
        try:
            return path, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnalysisError(f"{path} is not UTF-8 text: {exc}") from None
    if not isinstance(path_or_source, str):
        raise TypeError("analyze() needs a path or the source text of a script, got "
                        f"{type(path_or_source).__name__}")
    return "<script>", path_or_source


def parse_script(path: str, source: str) -> ast.Module:
    """The script's AST; a syntax error becomes an :class:`AnalysisError` naming the line."""
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        where = f"{exc.filename or path}, line {exc.lineno}"
        text = f": {exc.text.strip()}" if exc.text else ""
        raise AnalysisError(f"syntax error in {where}: {exc.msg}{text}") from None


# -- the collector -----------------------------------------------------------------------------


@dataclass
class _Summary:
    """What a statement, or the body of a function, does to global state."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    mutates: set[str] = field(default_factory=set)
    effects: set[Effect] = field(default_factory=set)
    barriers: list[str] = field(default_factory=list)
    refs: set[str] = field(default_factory=set)        # user functions/classes referenced
    methods: set[str] = field(default_factory=set)     # attribute names called
    aliases: list[tuple[set[str], set[str]]] = field(default_factory=list)
    unpicklable: set[str] = field(default_factory=set)
    file_vars: set[str] = field(default_factory=set)
    mutated_params: bool = False
    mutated_param_names: set[str] = field(default_factory=set)
    calls_mutating: list[tuple[str, list[str]]] = field(default_factory=list)

    def merge(self, other: _Summary) -> None:
        self.reads |= other.reads
        self.writes |= other.writes
        self.mutates |= other.mutates
        self.effects |= other.effects
        self.barriers += [b for b in other.barriers if b not in self.barriers]


def _names_in_target(t: ast.AST) -> tuple[list[str], list[str]]:
    """(names bound, names mutated) by an assignment target."""
    bound: list[str] = []
    mutated: list[str] = []
    if isinstance(t, ast.Name):
        bound.append(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            b, m = _names_in_target(e)
            bound += b
            mutated += m
    elif isinstance(t, ast.Starred):
        return _names_in_target(t.value)
    elif isinstance(t, (ast.Subscript, ast.Attribute)):
        root = _root_name(t)
        if root is not None:
            mutated.append(root)
    return bound, mutated


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _local_names(fn: ast.AST) -> tuple[set[str], set[str]]:
    """(local names, names declared global) of a function or lambda body."""
    args = fn.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    if args.vararg:
        params.add(args.vararg.arg)
    if args.kwarg:
        params.add(args.kwarg.arg)
    if isinstance(fn, ast.Lambda):
        return params, set()
    declared: set[str] = set()
    local = set(params)
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(node.name)
            stack += [*node.decorator_list]
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                local.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return local - declared, declared


class _Collector(ast.NodeVisitor):
    """Collects a :class:`_Summary` of one top-level statement or one function body."""

    def __init__(self, ctx: _Context, local: set[str] | None = None,
                 params: set[str] | None = None):
        self.ctx = ctx
        self.s = _Summary()
        self.scopes: list[set[str]] = [local] if local is not None else []
        self.params = params or set()
        self.class_depth = 0

    # names ----------------------------------------------------------------------------------

    def is_local(self, name: str) -> bool:
        return any(name in sc for sc in self.scopes)

    def read(self, name: str) -> None:
        if self.is_local(name):
            return
        self.s.reads.add(name)
        if name in self.ctx.iterators and not self.scopes:
            self.s.mutates.add(name)   # using an iterator may advance it
        if name in self.ctx.user_callables:
            self.s.refs.add(name)

    def bind(self, name: str) -> None:
        if self.scopes:
            if name in self.ctx.declared_global_here(self):
                self.s.writes.add(name)
            return
        if self.class_depth:
            return
        self.s.writes.add(name)

    def mutate(self, name: str) -> None:
        if self.is_local(name):
            if name in self.params:
                self.s.mutated_params = True
                self.s.mutated_param_names.add(name)
            return
        if name in self.ctx.modules:
            return
        self.s.mutates.add(name)
        self.s.reads.add(name)

    def effect(self, kind: str, detail: str, mode: str) -> None:
        self.s.effects.add(Effect(kind, detail, mode))

    def state(self, what: str) -> None:
        """A statement sets process state that later statements may read (at top level,
        or through a function a statement calls)."""
        self.effect("state", what, "w")

    def barrier(self, reason: str) -> None:
        if reason not in self.s.barriers:
            self.s.barriers.append(reason)

    # scopes ---------------------------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read(node.id)
        else:
            self.bind(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.visit_arguments(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self.bind(node.name)
        if self.scopes:  # a nested function: its body counts as part of the enclosing one
            local, _ = _local_names(node)
            self.scopes.append(local)
            for st in node.body:
                self.visit(st)
            self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arguments(self, args: ast.arguments) -> None:
        for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(d)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_arguments(node.args)
        local, _ = _local_names(node)
        self.scopes.append(local)
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]:
            self.visit(d)
        self.bind(node.name)
        self.class_depth += 1
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in st.decorator_list:
                    self.visit(d)
                self.visit_arguments(st.args)
            else:
                self.visit(st)
        self.class_depth -= 1

    def _comprehension(self, node: ast.AST, elts: list[ast.AST]) -> None:
        local: set[str] = set()
        for gen in node.generators:
            for n in ast.walk(gen.target):
                if isinstance(n, ast.Name):
                    local.add(n.id)
        first = True
        for gen in node.generators:
            if first:
                self.visit(gen.iter)  # the first iterable is evaluated outside
            self.scopes.append(local)
            if not first:
                self.visit(gen.iter)
            for cond in gen.ifs:
                self.visit(cond)
            self.scopes.pop()
            first = False
        self.scopes.append(local)
        for e in elts:
            self.visit(e)
        self.scopes.pop()

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_ListComp
    visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        # a walrus binds in the enclosing function or module scope
        saved = self.scopes
        self.scopes = [sc for sc in saved if "__function__" in sc] or []
        self.bind(node.target.id)
        self.scopes = saved

    def visit_Global(self, node: ast.Global) -> None:
        pass

    # statements -----------------------------------------------------------------------------

    def _assign(self, targets: list[ast.AST], value: ast.AST | None) -> None:
        bound_all: set[str] = set()
        for t in targets:
            bound, mutated = _names_in_target(t)
            bound_all.update(bound)
            for m in mutated:
                self.mutate(m)
                if value is not None:
                    self.s.aliases.append(({m}, self._alias_sources(value)))
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Call) and \
                    self.ctx.qualname(t.value.func) == "decimal.getcontext":
                self.state("the decimal context")
            elif isinstance(t, ast.Attribute) and _root_name(t) in self.ctx.modules:
                self.state(f"the module attribute {ast.unparse(t)}")
            if isinstance(t, ast.Subscript) and self.ctx.qualname(t.value) == "os.environ":
                self.effect("env", "os.environ", "w")
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and \
                    _root_name(t) in self.ctx.modules and \
                    self.ctx.qualname(_strip(t)) != "sys.path":
                self.state(f"the module attribute {ast.unparse(t.value)}")
            if isinstance(t, (ast.Subscript, ast.Attribute)) and \
                    self.ctx.qualname(_strip(t)) == "sys.path":
                self.effect("import", "sys.path", "w")
        for t in targets:
            self.visit(t)
        if value is not None:
            self.visit(value)
            if not self.scopes:
                names = {n for n in bound_all}
                self.s.aliases.append((names, self._alias_sources(value)))
                if self._unpicklable_value(value):
                    self.s.unpicklable |= names
                if self._iterator_value(value):
                    self.ctx.iterators |= names
                if isinstance(value, ast.Call) and self.ctx.qualname(value.func) in (
                        "open", "io.open", "codecs.open", "gzip.open"):
                    self.s.file_vars |= names
                    path = self.ctx.literal_path(value.args[0] if value.args else None)
                    if path is not None and (os.path.isabs(path) or not self.ctx.changes_cwd):
                        path = os.path.normpath(path)
                    else:
                        path = "?"
                    for n in names:
                        self.ctx.file_var_paths[n] = path

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)
        self.visit(node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        bound, mutated = _names_in_target(node.target)
        for name in [*bound, *mutated]:
            self.read(name)
            self.mutate(name)
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id)
            self.s.aliases.append(({node.target.id}, self._alias_sources(node.value)))
        else:
            self.visit(node.target)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            _, mutated = _names_in_target(t)
            for m in mutated:
                self.mutate(m)
                if not self.scopes:
                    self.ctx.del_through.append((self, m))
            self.visit(t)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._assign([node.target], None)
        src = self._alias_sources(node.iter)
        bound, _ = _names_in_target(node.target)
        self.s.aliases.append((set(bound), src))
        for st in [*node.body, *node.orelse]:
            self.visit(st)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._assign([item.optional_vars], None)
                bound, _ = _names_in_target(item.optional_vars)
                self.s.aliases.append((set(bound), self._alias_sources(item.context_expr)))
                if self._unpicklable_value(item.context_expr):
                    self.s.unpicklable |= set(bound)
                    self.s.file_vars |= set(bound)
        for st in node.body:
            self.visit(st)

    visit_AsyncWith = visit_With

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.bind((a.asname or a.name).split(".")[0])
        self.effect("import", "import", "w")
        self.effect("import", "sys.path", "r")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        for a in node.names:
            if a.name == "*":
                names = self.ctx.star_names(mod)
                if names is None:
                    self.barrier(f"from {mod} import * binds names the analysis cannot list")
                else:
                    for n in names:
                        self.bind(n)
            else:
                self.bind(a.asname or a.name)
        self.effect("import", "import", "w")
        self.effect("import", "sys.path", "r")

    def visit_Raise(self, node: ast.Raise) -> None:
        if not self.scopes:
            self.barrier("raise ends the program")
        self.generic_visit(node)

    # expressions ----------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        q = self.ctx.qualname(node)
        if q is not None:
            if q == "os.environ" or q.startswith("os.environ."):
                self.effect("env", "os.environ", "r")
            elif q.startswith(("sys.stdout", "sys.stderr")):
                self.effect("output", q.split(".")[1], "w")
            elif q == "sys.path":
                self.effect("import", "sys.path", "r")
            elif q in ("sys.modules", "sys.argv") and isinstance(node.ctx, ast.Store):
                self.barrier(f"assigns {q}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        q = self.ctx.qualname(func)
        args = node.args
        kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
        if isinstance(func, ast.Name) and not self.is_local(func.id) and \
                func.id not in self.ctx.user_names and func.id in _BUILTINS:
            self._builtin_call(func.id, args, kw)
        elif q is not None:
            self._module_call(q, args, kw)
        elif isinstance(func, ast.Attribute):
            self._method_call(func, args, kw)
        if isinstance(func, ast.Name) and func.id in self.ctx.user_callables:
            fn = self.ctx.summaries.get(func.id)
            if fn is not None and fn.mutated_params:
                for a in self._mutated_arguments(func.id, node, fn):
                    root = _root_name(a)
                    if root is not None:
                        self.mutate(root)
        for a in [*args, *kw.values()]:  # a stateful module handed to a function
            if isinstance(a, ast.Name) and a.id in self.ctx.modules:
                mq = self.ctx.modules[a.id]
                if mq == "random" or mq.startswith("numpy.random"):
                    self.effect("random", "global", "w")
                elif mq.startswith(("matplotlib.pyplot", "pylab")):
                    self.effect("figure", "pyplot", "w")
        if "out" in kw:
            root = _root_name(kw["out"])
            if root is not None:
                self.mutate(root)
        self.generic_visit(node)

    def _mutated_arguments(self, name: str, call: ast.Call, fn: _Summary) -> list[ast.expr]:
        """The arguments of a call of the user function ``name`` bound to parameters it
        mutates (every argument when the call or the signature is not plain)."""
        every = [*call.args, *[k.value for k in call.keywords]]
        sig = self.ctx.signatures.get(name)
        if sig is None or sig[2] or any(isinstance(a, ast.Starred) for a in call.args) or \
                any(k.arg is None for k in call.keywords):
            return every
        positional, kwonly, _ = sig
        if len(call.args) > len(positional):
            return every
        out = [a for p, a in zip(positional, call.args, strict=False)
               if p in fn.mutated_param_names]
        out += [k.value for k in call.keywords
                if k.arg in fn.mutated_param_names or k.arg not in (*positional, *kwonly)]
        return out

    def _builtin_call(self, name: str, args: list[ast.expr], kw: dict) -> None:
        if name in _BARRIER_BUILTINS and (name not in ("vars", "locals") or not args) and \
                not (name == "locals" and self.scopes):
            self.barrier(_BARRIER_BUILTINS[name])
        elif name == "next" and args:
            root = _root_name(args[0])
            if root is not None:
                self.mutate(root)
        elif name == "print":
            target = kw.get("file")
            tq = self.ctx.qualname(target) if target is not None else None
            if target is None or (isinstance(target, ast.Constant) and target.value is None):
                self.effect("output", "stdout", "w")
            elif tq in ("sys.stdout", "sys.stderr"):
                self.effect("output", tq.split(".")[1], "w")
            else:
                root = _root_name(target)
                if root is not None:
                    self.mutate(root)
        elif name == "open":
            mode_node = args[1] if len(args) > 1 else kw.get("mode")
            if mode_node is None:
                mode = "r"
            elif isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str):
                mode = "w" if set(mode_node.value) & set("wax+") else "r"
            else:
                mode = "w"
            self._file(args[0] if args else kw.get("file"), mode)

    def _module_call(self, q: str, args: list[ast.expr], kw: dict) -> None:
        for prefix, reason in _BARRIER_CALLS:
            if q == prefix or q.startswith(prefix):
                self.barrier(reason)
                return
        for prefix, what in STATE_CALLS.items():
            if q == prefix or (prefix.endswith(".") and q.startswith(prefix)):
                if q != "decimal.getcontext":  # only reading it, unless changed after
                    self.state(what)
                break
        last = q.rsplit(".", 1)[-1]
        if q.startswith(("random.", "numpy.random.")) and last not in _RANDOM_PURE:
            self.effect("random", "global", "w")
        if q.startswith(("matplotlib.pyplot.", "pylab.")) or q == "matplotlib.use":
            self.effect("figure", "pyplot", "w")
        if q in ("os.chdir", "os.fchdir"):
            self.effect("cwd", "cwd", "w")
        elif q in ("os.getcwd", "os.path.abspath", "os.path.realpath", "pathlib.Path.cwd"):
            self.effect("cwd", "cwd", "r")
        if q in ("os.putenv", "os.unsetenv"):
            self.effect("env", "os.environ", "w")
        elif q == "os.getenv":
            self.effect("env", "os.environ", "r")
        if q.startswith(("sys.stdout.", "sys.stderr.")):
            self.effect("output", q.split(".")[1], "w")
        elif q.startswith(("pprint.", "logging.")) and last not in ("pformat", "getLogger"):
            self.effect("output", "stdout" if q.startswith("pprint.") else "stderr", "w")
        if q.startswith("os.environ."):
            if last not in ("get", "keys", "items", "values", "copy"):
                self.effect("env", "os.environ", "w")
        if q.startswith("sys.path."):
            self.effect("import", "sys.path", "w")
        for name, (mode, idx) in _FILE_CALLS.items():
            if q == name or (name.endswith(("_", ".")) and q.startswith(name)):
                path = None if idx < 0 else (args[idx] if len(args) > idx else None)
                if idx >= 0 and path is None:
                    path = kw.get("fname") or kw.get("file") or kw.get("path")
                self._file(path, "w" if mode == "?" else mode)
                break
        if q in _INPLACE_ARG:
            idx = _INPLACE_ARG[q]
            if len(args) > idx:
                root = _root_name(args[idx])
                if root is not None and root not in self.ctx.modules:
                    self.mutate(root)

    def _method_call(self, func: ast.Attribute, args: list[ast.expr], kw: dict) -> None:
        attr = func.attr
        self.s.methods.add(attr)
        if isinstance(func.value, ast.Call):
            made_by = self.ctx.qualname(func.value.func)
            if made_by == "logging.getLogger" and attr in _LOGGER_SETTERS:
                self.state("logging's configuration")
            elif made_by == "decimal.getcontext" and attr not in PURE_METHODS:
                self.state("the decimal context")
        if attr in _FILE_METHODS:
            receiver = func.value
            path = None
            if isinstance(receiver, ast.Call) and self.ctx.qualname(receiver.func) in (
                    "pathlib.Path", "pathlib.PurePath") and receiver.args:
                path = receiver.args[0]
            elif attr in ("to_csv", "to_json", "to_parquet", "savefig", "tofile",
                          "to_excel", "to_pickle", "to_html", "to_hdf", "to_feather"):
                path = args[0] if args else None
            self._file(path, _FILE_METHODS[attr])
        root = _root_name(func.value)
        if root is None:
            return
        if root in self.ctx.file_vars_all:
            self.mutate(root)
            self.effect("file", self.ctx.file_var_paths.get(root, "?"), "w")
        elif attr not in PURE_METHODS and attr not in self.ctx.pure_user_methods:
            self.mutate(root)
            for a in [*args, *kw.values()]:
                srcs = self._alias_sources(a)
                if srcs:
                    self.s.aliases.append(({root}, srcs))

    def _file(self, node: ast.AST | None, mode: str) -> None:
        path = self.ctx.literal_path(node)
        if path is None or not os.path.isabs(path):
            self.effect("cwd", "cwd", "r")
            if self.ctx.changes_cwd:
                path = None
        self.effect("file", "?" if path is None else os.path.normpath(path), mode)

    def _alias_sources(self, value: ast.AST) -> set[str]:
        """Names whose objects the value of ``value`` may hold a reference to."""
        out: set[str] = set()
        stack = [value]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Constant):
                continue
            if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr)):
                continue
            if isinstance(n, ast.Call):
                fq = self.ctx.qualname(n.func)
                if isinstance(n.func, ast.Name) and n.func.id in _FRESH_BUILTINS:
                    continue
                if fq is not None and (fq.startswith("math.") or fq in _FRESH_BUILTINS):
                    continue
                if isinstance(n.func, ast.Name) and n.func.id in self.ctx.summaries:
                    out |= (self.ctx.summaries[n.func.id].reads - self.ctx.user_callables
                            - set(self.ctx.modules))
            if isinstance(n, ast.Name):
                if not self.is_local(n.id) and n.id not in self.ctx.modules and \
                        n.id not in self.ctx.user_callables:
                    out.add(n.id)
                continue
            if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                              ast.GeneratorExp)):
                inner = _comprehension_locals(n)
                for m in ast.walk(n):
                    if isinstance(m, ast.Name) and not self.is_local(m.id) and \
                            m.id not in inner and m.id not in self.ctx.modules and \
                            m.id not in self.ctx.user_callables:
                        out.add(m.id)
                continue
            stack.extend(ast.iter_child_nodes(n))
        return out

    def _unpicklable_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.GeneratorExp):
            return True
        if isinstance(value, ast.Call):
            q = self.ctx.qualname(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in self.ctx.generators:
                return True
            return q in _UNPICKLABLE_CALLS
        return False

    def _iterator_value(self, value: ast.AST) -> bool:
        """Whether ``value`` may be an iterator, whose every use may advance it."""
        if isinstance(value, ast.GeneratorExp):
            return True
        if isinstance(value, ast.Call):
            q = self.ctx.qualname(value.func) or ""
            if isinstance(value.func, ast.Name) and value.func.id in self.ctx.iterator_funcs:
                return True
            return q in _ITERATOR_CALLS or q.startswith("itertools.") or \
                q in _UNPICKLABLE_CALLS
        return False


def _strip(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        node = node.value
    return node


# -- the context of one script -----------------------------------------------------------------


class _Context:
    """Facts about the whole script: imports, user functions and classes, constants."""

    def __init__(self, tree: ast.Module):
        self.modules: dict[str, str] = {}       # name bound by an import -> qualified name
        self.constants: dict[str, str] = {}     # names bound once, to a string literal
        self.user_callables: set[str] = set()   # top-level functions, classes and lambdas
        self.user_names: set[str] = set()       # every name bound at top level
        self.generators: set[str] = set()       # user functions that contain yield
        self.summaries: dict[str, _Summary] = {}
        # a plain function's (positional parameters, keyword-only ones, *args or **kwargs)
        self.signatures: dict[str, tuple[list[str], set[str], bool]] = {}
        self.method_summaries: dict[str, _Summary] = defaultdict(_Summary)
        self.del_through: list[tuple[_Collector, str]] = []
        self.file_vars_all: set[str] = set()
        self.file_var_paths: dict[str, str] = {}
        self.iterators: set[str] = set()         # names bound to iterators (so far)
        self.iterator_funcs: set[str] = set()    # user functions that may return one
        self.pure_user_methods: set[str] = set()  # methods that change nothing
        self._globals_decl: dict[int, set[str]] = {}
        self.changes_cwd = False
        assigned: dict[str, int] = defaultdict(int)
        const_bound: dict[str, int] = defaultdict(int)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.modules[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        self.modules[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Call):
                q = self.qualname(node.func)
                if q in ("os.chdir", "os.fchdir"):
                    self.changes_cwd = True
        for st in tree.body:
            local_targets = {id(m) for n in _top_bindings(st) if isinstance(n, ast.comprehension)
                             for m in ast.walk(n.target)}
            for node in _top_bindings(st):
                if id(node) in local_targets:
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.user_callables.add(node.name)
                    self.user_names.add(node.name)
                    if not isinstance(node, ast.ClassDef) and any(
                            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
                        self.generators.add(node.name)
                        self.iterator_funcs.add(node.name)
                    elif not isinstance(node, ast.ClassDef) and _returns_iterator(node):
                        self.iterator_funcs.add(node.name)
                elif isinstance(node, ast.Assign):
                    if _is_immutable_literal(node.value):
                        for t in node.targets:
                            if isinstance(t, ast.Name):
                                const_bound[t.id] += 1
                    if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        if isinstance(node.value, ast.Lambda):
                            self.user_callables.add(node.targets[0].id)
                        lit = self.literal_path(node.value)
                        if lit is not None:
                            self.constants[node.targets[0].id] = lit
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    assigned[node.id] += 1
                    self.user_names.add(node.id)
        for name in list(self.constants):
            if assigned[name] != 1:
                del self.constants[name]
        # names only ever bound, by plain assignments, to numbers, strings and the like
        self.immutables: set[str] = {n for n, k in const_bound.items()
                                     if k == assigned[n]}
        for name in self.user_names:  # a rebound import name is a variable
            if name in self.modules and assigned[name]:
                del self.modules[name]

    def declared_global_here(self, col: _Collector) -> set[str]:
        return self._globals_decl.get(id(col), set())

    def qualname(self, node: ast.AST | None) -> str | None:
        """``np.random.rand`` -> ``numpy.random.rand`` when ``np`` is an imported module;
        ``print`` -> ``print``; ``None`` for anything rooted at a variable."""
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return self.modules[node.id]
            if node.id in _BUILTINS and node.id not in self.user_names:
                return node.id
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def literal_path(self, node: ast.AST | None) -> str | None:
        """The string a path expression certainly evaluates to, or ``None``."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Call) and node.args and not node.keywords:
            q = self.qualname(node.func)
            if q == "os.path.join":
                parts = [self.literal_path(a) for a in node.args]
                if all(p is not None for p in parts):
                    return os.path.join(*parts)  # type: ignore[arg-type]
            elif q in ("pathlib.Path", "pathlib.PurePath") and len(node.args) == 1:
                return self.literal_path(node.args[0])
        return None

    def star_names(self, module: str) -> list[str] | None:
        """The names ``from module import *`` binds, for standard-library modules."""
        top = module.split(".")[0]
        if not top or top not in sys.stdlib_module_names:
            return None
        import importlib

        try:
            mod = importlib.import_module(module)
        except Exception:
            return None
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n in dir(mod) if not n.startswith("_")]
        return [str(n) for n in names]


def _comprehension_locals(node: ast.AST) -> set[str]:
    """The names bound by the targets of the comprehensions (or a lambda's parameters)
    inside ``node``."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= _local_names(n)[0]
    return out


def _is_immutable_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_immutable_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(_is_immutable_literal(e) for e in node.elts)
    return False


def _returns_iterator(fn: ast.AST) -> bool:
    """Whether a function has a ``return`` of a generator expression or of a call to
    ``iter``/``map``/``filter``/``zip``/``enumerate``/``reversed`` or ``itertools``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, ast.GeneratorExp):
                return True
            if isinstance(v, ast.Call):
                f = v.func
                if isinstance(f, ast.Name) and f.id in _ITERATOR_CALLS:
                    return True
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                        f.value.id == "itertools":
                    return True
    return False


def _top_bindings(st: ast.stmt) -> Iterable[ast.AST]:
    """The nodes of a top-level statement outside function bodies and class bodies."""
    stack: list[ast.AST] = [st]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _function_nodes(tree: ast.Module) -> list[tuple[str, ast.AST, str | None]]:
    """(name, node, class name or None) of every function defined outside other functions
    (at top level, inside top-level compound statements or as methods), and lambdas bound
    to a top-level name."""
    out: list[tuple[str, ast.AST, str | None]] = []
    for st in tree.body:
        for node in _top_bindings(st):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node.name, node, None))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append((item.name, item, node.name))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and \
                    len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                out.append((node.targets[0].id, node.value, None))
    return out


def _summarise_functions(ctx: _Context, tree: ast.Module) -> None:
    """Every user function's summary, closed over the user functions it references."""
    direct: dict[str, _Summary] = {}
    methods: dict[str, list[str]] = defaultdict(list)   # method name -> keys
    class_members: dict[str, list[str]] = defaultdict(list)
    for name, node, cls in _function_nodes(tree):
        local, declared = _local_names(node)
        col = _Collector(ctx, local=local | {"__function__"}, params={
            a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]})
        ctx._globals_decl[id(col)] = declared
        body = node.body if isinstance(node.body, list) else [node.body]
        for st in body:
            col.visit(st)
        key = f"{cls}.{name}" if cls else name
        if key in direct:
            prev = direct[key]
            prev.merge(col.s)
            prev.refs |= col.s.refs
            prev.methods |= col.s.methods
            prev.mutated_params |= col.s.mutated_params
            prev.mutated_param_names |= col.s.mutated_param_names
            ctx.signatures.pop(key, None)   # defined twice: either may be called
        else:
            direct[key] = col.s
            a = node.args
            if not cls and not isinstance(node, ast.Lambda):
                ctx.signatures[key] = ([p.arg for p in [*a.posonlyargs, *a.args]],
                                       {p.arg for p in a.kwonlyargs},
                                       a.vararg is not None or a.kwarg is not None)
        if cls:
            methods[name].append(key)
            class_members[cls].append(key)
    # close over references: a function includes what the functions it names do
    closed: dict[str, _Summary] = {}
    for key in direct:
        total = _Summary()
        seen = {key}
        stack = [key]
        while stack:
            k = stack.pop()
            s = direct[k]
            total.merge(s)
            if k == key:
                total.mutated_params |= s.mutated_params
                total.mutated_param_names |= s.mutated_param_names
            nxt = [*s.refs, *[m for name in s.methods for m in methods.get(name, [])]]
            for r in list(nxt):
                nxt += class_members.get(r, [])
            for r in nxt:
                if r in direct and r not in seen:
                    seen.add(r)
                    stack.append(r)
        closed[key] = total
    for key, s in closed.items():
        name = key.split(".")[-1]
        if "." in key:
            ctx.method_summaries[name].merge(s)
            cls = key.split(".")[0]
            ctx.summaries.setdefault(cls, _Summary()).merge(s)
        else:
            ctx.summaries[name] = s
    for cls in class_members:
        ctx.summaries.setdefault(cls, _Summary())
    # methods of the script's classes that change neither their object nor any global
    for name, keys in methods.items():
        if name not in _KNOWN_MUTATORS and not any(
                direct[k].mutated_params or direct[k].writes or direct[k].mutates
                for k in keys):
            ctx.pure_user_methods.add(name)


# -- the graph ---------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def analyze(path_or_source: str | os.PathLike) -> ScriptGraph:
    """The task graph of a script, from its path or its source text, without running it.

    >>> g = analyze("x = 1\\ny = x + 1\\nx = 2\\nprint(y)\\n")
    >>> [(e.src, e.dst, e.type, e.variable) for e in g.edges]
    [(0, 1, 'def-use', 'x'), (1, 2, 'anti', 'x'), (0, 2, 'output', 'x'), (1, 3, 'def-use', 'y')]
    """
    path, source = load_script(path_or_source)
    tree = parse_script(path, source)
    ctx = _Context(tree)
    _summarise_functions(ctx, tree)
    lines = source.splitlines()
    raw: list[tuple[ast.stmt, _Summary]] = []
    for st in tree.body:
        col = _Collector(ctx)
        col.visit(st)
        s = col.s
        # what the referenced user functions and the called methods do
        extra = _Summary()
        for r in s.refs:
            if r in ctx.summaries:
                extra.merge(ctx.summaries[r])
        for m in s.methods:
            if m in ctx.method_summaries:
                extra.merge(ctx.method_summaries[m])
        s.reads |= extra.reads
        s.writes |= extra.writes
        s.mutates |= extra.mutates
        s.reads |= extra.mutates
        s.effects |= extra.effects
        s.barriers += [b for b in extra.barriers if b not in s.barriers]
        ctx.file_vars_all |= s.file_vars
        raw.append((st, s))
    # a name defined at top level, or a module, is a global; anything else read is a builtin
    defined = set(ctx.user_names) | set(ctx.modules)
    for _, s in raw:
        defined |= s.writes
    # aliases: names that may share an object, and which of them are mutated
    names = sorted(defined)
    ids = {n: i for i, n in enumerate(names)}
    alias = _UnionFind(len(names))
    for _, s in raw:
        for targets, sources in s.aliases:
            for t in targets:
                for src in sources:
                    if src in ctx.immutables or t in ctx.immutables:
                        continue   # a number or a string is never changed in place
                    if t in ids and src in ids and t != src:
                        alias.union(ids[t], ids[src])
    members: dict[int, set[str]] = defaultdict(set)
    for n in names:
        members[alias.find(ids[n])].add(n)
    mutated_classes: set[int] = set()
    for _, s in raw:
        for m in s.mutates:
            if m in ids:
                mutated_classes.add(alias.find(ids[m]))
    # mutation through an alias mutates every member; del through an alias is a barrier
    for _, s in raw:
        for m in list(s.mutates):
            if m in ids and len(members[alias.find(ids[m])]) > 1:
                extra = members[alias.find(ids[m])] - {m}
                s.mutates |= extra
                s.reads |= extra
    for col, m in ctx.del_through:
        if m in ids and len(members[alias.find(ids[m])]) > 1:
            col.barrier(f"del through {m}, which may alias "
                        + ", ".join(sorted(members[alias.find(ids[m])] - {m})))
    for _, s in raw:  # a module's settings are process state, not a variable's value
        if any(e.kind == "state" for e in s.effects):
            s.mutates -= set(ctx.modules)
    tasks_info = []
    after_barrier = False
    for st, s in raw:
        # after a barrier any name may exist: every name read may be a variable
        visible = defined if not after_barrier else defined | s.reads
        after_barrier = after_barrier or bool(s.barriers)
        uses = (s.reads | s.mutates) & visible
        defines = (s.writes | s.mutates) & defined
        tasks_info.append((st, s, uses, defines))
    edges = _edges(tasks_info)
    groups, reasons = _groups(tasks_info, ctx, members, alias, ids, mutated_classes)
    tasks = []
    for i, (st, s, uses, defines) in enumerate(tasks_info):
        end = st.end_lineno or st.lineno
        first = min([st.lineno, *[d.lineno for d in getattr(st, "decorator_list", [])]])
        text = "\n".join(lines[first - 1:end])
        tasks.append(Task(
            index=i, lineno=first, end_lineno=end, source=text, uses=frozenset(uses),
            defines=frozenset(defines), mutates=frozenset(s.mutates & defined),
            effects=tuple(sorted(s.effects, key=lambda e: (e.kind, e.detail, e.mode))),
            barrier="; ".join(s.barriers) if s.barriers else None, group=groups[i]))
    tasks = _mark_replicated(tasks, edges, raw)
    changed: dict[str, int] = defaultdict(int)   # name -> statements that change it
    for _, s in raw:
        for v in s.mutates:
            changed[v] += 1
    tasks = [replace(t, loop=_loop_split(st, s, t, ctx, changed)) for t, (st, s) in
             zip(tasks, raw, strict=True)]
    return ScriptGraph(path, source, tasks, edges, reasons)


def _edges(info: list[tuple[ast.stmt, _Summary, set[str], set[str]]]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple[int, int, str, str]] = set()

    def add(a: int, b: int, kind: str, var: str) -> None:
        if a != b and (a, b, kind, var) not in seen:
            seen.add((a, b, kind, var))
            edges.append(Edge(a, b, kind, var))

    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = defaultdict(list)
    res_writer: dict[tuple[str, str], int] = {}
    res_readers: dict[tuple[str, str], list[int]] = defaultdict(list)
    files = _FileOrder()
    # fences: barriers, and statements that set process state (``state`` edges)
    last_fence: tuple[int, str, str] | None = None
    since_fence: list[int] = []
    for i, (_, s, uses, defines) in enumerate(info):
        fence = _fence(s)
        if fence is not None:
            for j in since_fence:
                add(j, i, *fence)
            if last_fence is not None:
                add(last_fence[0], i, *fence)
        elif last_fence is not None:
            add(last_fence[0], i, last_fence[1], last_fence[2])
        for v in sorted(uses):
            if v in last_writer:
                add(last_writer[v], i, "def-use", v)
        for v in sorted(defines):
            for r in readers.get(v, ()):
                add(r, i, "anti", v)
            if v in last_writer and v not in uses:
                add(last_writer[v], i, "output", v)
        for v in uses - defines:
            readers[v].append(i)
        for v in defines:
            last_writer[v] = i
            readers[v] = []
        # effects other than files: one resource per (kind, detail)
        effects = sorted((e for e in s.effects if e.kind != "state"),
                         key=lambda e: (e.kind, e.detail, e.mode))
        for e in effects:
            if e.kind == "file":
                continue
            key = (e.kind, e.detail if e.kind != "output" else "stream")
            etype = _EFFECT_EDGE[e.kind]
            if key in res_writer:
                add(res_writer[key], i, etype, e.detail)
            if e.mode == "w":
                for r in res_readers.get(key, ()):
                    add(r, i, etype, e.detail)
        for e in effects:
            if e.kind == "file":
                continue
            key = (e.kind, e.detail if e.kind != "output" else "stream")
            if e.mode == "w":
                res_writer[key] = i
                res_readers[key] = []
            else:
                res_readers[key].append(i)
        files.access(i, {(e.detail, e.mode) for e in effects if e.kind == "file"}, add)
        if fence is not None:
            last_fence = (i, *fence)
            since_fence = []
        else:
            since_fence.append(i)
    return edges


def _fence(s: _Summary) -> tuple[str, str] | None:
    """``(edge type, reason)`` when a statement is ordered after every statement before it
    and before every statement after it: a barrier, or a setter of process state."""
    if s.barriers:
        return ("barrier", s.barriers[0])
    states = sorted(e.detail for e in s.effects if e.kind == "state")
    return ("state", states[0]) if states else None


class _FileOrder:
    """Ordering edges between file accesses: a write is ordered after every earlier access
    of the same path, a read after the earlier writes; an unknown path (``?``) may be any
    path. Kept in time linear in the accesses: an unknown write stands for every earlier
    access, so later accesses only look back to it."""

    def __init__(self) -> None:
        self.writer: dict[str, int] = {}                        # path -> last writer
        self.readers: dict[str, list[int]] = defaultdict(list)  # path -> readers since
        self.unknown_writer = -1
        self.unknown_readers: list[int] = []          # unknown reads since unknown_writer
        self.since: list[tuple[int, str, str]] = []   # known accesses since unknown_writer

    def access(self, i: int, ops: set[tuple[str, str]], add) -> None:
        for path, mode in sorted(ops):
            u = self.unknown_writer
            if path != "?":
                if u >= 0:
                    add(u, i, "file", path)
                if self.writer.get(path, -1) > u:
                    add(self.writer[path], i, "file", path)
                if mode == "w":
                    for r in self.readers.get(path, ()):
                        if r > u:
                            add(r, i, "file", path)
                    for r in self.unknown_readers:
                        add(r, i, "file", path)
            else:
                if u >= 0:
                    add(u, i, "file", "?")
                for j, other, omode in self.since:
                    if mode == "w" or omode == "w":
                        add(j, i, "file", other)
                if mode == "w":
                    for r in self.unknown_readers:
                        add(r, i, "file", "?")
        for path, mode in sorted(ops):
            if path == "?":
                if mode == "w":
                    self.unknown_writer = i
                    self.unknown_readers = []
                    self.since = []
                else:
                    self.unknown_readers.append(i)
            else:
                if mode == "w":
                    self.writer[path] = i
                    self.readers[path] = []
                else:
                    self.readers[path].append(i)
                self.since.append((i, path, mode))


def _groups(info, ctx, members, alias, ids, mutated_classes):
    """Tasks that must run on one worker: union-find over tasks."""
    n = len(info)
    uf = _UnionFind(n)
    reasons: dict[int, str] = {}
    flagged: dict[int, str] = {}
    first_of: dict[str, int] = {}

    def join(i: int, key: str, reason: str) -> None:
        flagged.setdefault(i, reason)
        if key in first_of:
            uf.union(first_of[key], i)
        else:
            first_of[key] = i

    pinned_names: set[str] = set()
    for _, s, _, _ in info:
        pinned_names |= s.unpicklable
    pinned_classes = {alias.find(ids[v]) for v in pinned_names if v in ids}
    class_reason: dict[str, str] = {}

    def reason_of(key: str, c: int) -> str:
        if key not in class_reason:
            if key.startswith("pin:"):
                class_reason[key] = "values that cannot be pickled: " + ", ".join(
                    sorted(members[c] & pinned_names))
            else:
                names = sorted(members[c])
                more = f" and {len(names) - 8} more" if len(names) > 8 else ""
                class_reason[key] = "mutated aliases: " + ", ".join(names[:8]) + more
        return class_reason[key]

    for i, (_, s, uses, defines) in enumerate(info):
        kinds = {e.kind for e in s.effects}
        if "random" in kinds:
            join(i, "random", "the global random generator state")
        if "figure" in kinds:
            join(i, "figure", "matplotlib's current figure")
        for v in sorted(uses | defines):
            if v not in ids:
                continue
            c = alias.find(ids[v])
            if c in pinned_classes:
                join(i, f"pin:{c}", reason_of(f"pin:{c}", c))
            elif c in mutated_classes and len(members[c]) > 1 and v in defines:
                # a statement that changes or binds an alias joins the others; one that
                # only reads them may take copies (its edges order it with the changes)
                join(i, f"alias:{c}", reason_of(f"alias:{c}", c))
    # a value made inside a group is mutated there too (a figure's axes, a file's writer)
    owner: dict[str, int] = {}
    for i, (_, s, _uses, defines) in enumerate(info):
        for v in sorted(s.mutates):
            if v in owner:
                flagged.setdefault(i, flagged[owner[v]])
                uf.union(owner[v], i)
        if i in flagged:
            for v in defines:
                owner[v] = i
        else:
            for v in defines:
                if v not in s.mutates:
                    owner.pop(v, None)
    groups: list[int | None] = [None] * n
    sizes: dict[int, int] = defaultdict(int)
    for i in flagged:
        sizes[uf.find(i)] += 1
    for i in flagged:
        root = uf.find(i)
        if sizes[root] > 1:
            groups[i] = root
            reasons.setdefault(root, flagged[root] if root in flagged else flagged[i])
    for i in flagged:  # a lone task holding an unpicklable value still stays where it is
        if groups[i] is None and flagged[i].startswith("values that cannot"):
            groups[i] = i
            reasons[i] = flagged[i]
    return groups, reasons


# -- loops that split --------------------------------------------------------------------------


@dataclass(frozen=True)
class ForLoop:
    """What a ``for`` loop that only collects does: the lists it appends to (``R.append(e)``
    as a statement of its body), the dicts it sets entries of (``D[k] = e``), and the names
    its body and target bind (they keep their last values after the loop)."""

    lists: tuple[str, ...]
    dicts: tuple[str, ...]
    bound: tuple[str, ...]


def _stored(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)]


def _loaded(node: ast.AST, inner: set[str] = frozenset()) -> list[str]:
    """Names a node reads (not those local to its comprehensions or lambdas)."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                          ast.Lambda)):
            local = _comprehension_locals(n) if not isinstance(n, ast.Lambda) else {
                a.arg for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]}
            out += [m.id for m in ast.walk(n) if isinstance(m, ast.Name)
                    and isinstance(m.ctx, ast.Load) and m.id not in local]
    skip = {id(m) for n in ast.walk(node) if isinstance(
        n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda))
        for m in ast.walk(n)}
    out += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and id(n) not in skip]
    return [x for x in out if x not in inner]


def _carried(stmts: list[ast.stmt], bound: set[str], assigned: set[str]) -> str | None:
    """A name of ``bound`` that ``stmts`` may read before this iteration assigns it (a
    value carried from one iteration to the next), or None. Only assignments that surely
    happen count (not those inside ``if``, ``try`` or an inner loop's body)."""
    for st in stmts:
        if isinstance(st, (ast.For, ast.AsyncFor)):
            bad = set(_loaded(st.iter)) & (bound - assigned)
            if bad:
                return sorted(bad)[0]
            inner = _carried(st.body, bound, assigned | set(_stored(st.target)))
            if inner:
                return inner
            continue
        if isinstance(st, (ast.If, ast.While)):
            bad = set(_loaded(st.test)) & (bound - assigned)
            if bad:
                return sorted(bad)[0]
            for part in (st.body, st.orelse):
                inner = _carried(part, bound, set(assigned))
                if inner:
                    return inner
            continue
        if isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                bad = set(_loaded(item.context_expr)) & (bound - assigned)
                if bad:
                    return sorted(bad)[0]
                if item.optional_vars is not None:
                    assigned = assigned | set(_stored(item.optional_vars))
            inner = _carried(st.body, bound, assigned)
            if inner:
                return inner
            for b in st.body:
                if isinstance(b, (ast.Assign, ast.AnnAssign)):
                    assigned = assigned | set(_stored(b))
            continue
        if isinstance(st, ast.Try):
            for part in (st.body, *[h.body for h in st.handlers], st.orelse, st.finalbody):
                inner = _carried(part, bound, set(assigned))
                if inner:
                    return inner
            continue
        bad = set(_loaded(st)) & (bound - assigned)
        if bad:
            return sorted(bad)[0]
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            assigned = assigned | set(_stored(st))
    return None


def for_loop_parts(st: ast.stmt) -> ForLoop | str | None:
    """For a ``for`` loop over a variable or a ``range`` whose body, besides binding names,
    only appends to lists and sets dict entries (``R.append(e)``, ``D[k] = e``, never
    reading ``R`` or ``D`` otherwise), and whose iterations carry no value from one to the
    next, its :class:`ForLoop`; why not as a string for another ``for`` loop; ``None`` for
    any other statement."""
    if not isinstance(st, ast.For):
        return None
    if st.orelse:
        return "it has an else clause"
    if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Load))
               for n in ast.walk(st.target)):
        return "its target is not a name or a tuple of names"
    lists: list[str] = []
    dicts: list[str] = []
    target = _stored(st.target)
    bound = list(target)
    sinks: set[int] = set()
    body = ast.Module(body=st.body, type_ignores=[])
    comp_nodes = {id(m) for n in ast.walk(body) if isinstance(
        n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda))
        for m in ast.walk(n)}
    for node in ast.walk(body):
        if isinstance(node, (ast.Break, ast.Return, ast.Yield, ast.YieldFrom, ast.Global,
                             ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.Await, ast.NamedExpr, ast.Delete,
                             ast.AugAssign, ast.While, ast.Raise)):
            return f"its body has {type(node).__name__.lower()}, which the split cannot keep"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and \
                node.value.func.attr == "append" and \
                isinstance(node.value.func.value, ast.Name) and len(node.value.args) == 1 \
                and not node.value.keywords:
            lists.append(node.value.func.value.id)
            sinks.add(id(node.value.func.value))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                        isinstance(node, ast.Assign) and len(node.targets) == 1:
                    dicts.append(t.value.id)
                    sinks.add(id(t.value))
                elif isinstance(t, ast.Name) or (isinstance(t, (ast.Tuple, ast.List)) and all(
                        isinstance(e, ast.Name) for e in t.elts)):
                    bound.extend(_stored(t))
                else:
                    return f"it assigns to {ast.unparse(t)}"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                id(node) not in comp_nodes:
            bound.append(node.id)   # an inner loop's or a with's target
    if not lists and not dicts:
        return "its body neither appends to a list nor sets a dict entry"
    collected = set(lists) | set(dicts)
    if set(lists) & set(dicts):
        return "it appends to and sets entries of the same name"
    for node in ast.walk(body):
        if isinstance(node, ast.Name) and node.id in collected and id(node) not in sinks:
            return f"it reads {node.id}, which it collects into, inside the loop"
    if collected & set(bound):
        return f"it rebinds {sorted(collected & set(bound))[0]}, which it collects into"
    carried = _carried(st.body, set(bound), set(target))
    if carried is not None:
        return f"its iterations carry {carried} from one to the next"
    return ForLoop(tuple(dict.fromkeys(lists)), tuple(dict.fromkeys(dicts)),
                   tuple(dict.fromkeys(bound)))


def loop_parts(st: ast.stmt) -> tuple[str, ast.expr, ast.Name | None] | None:
    """``(kind, the iterable, the target)`` of a statement that maps over items: ``T =
    [... for v in items ...]`` (``"list"``), ``T = {k: v for ...}`` (``"dict"``), ``T =
    list(map(f, items))`` (``"map"``), or a ``for`` loop (``"for"``, no target: see
    :func:`for_loop_parts`); ``None`` for any other statement."""
    if isinstance(st, ast.For):
        return ("for", st.iter, None)
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)):
        return None
    v = st.value
    if isinstance(v, (ast.ListComp, ast.DictComp)) and not any(g.is_async
                                                               for g in v.generators):
        return ("list" if isinstance(v, ast.ListComp) else "dict", v.generators[0].iter,
                st.targets[0])
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "list" \
            and len(v.args) == 1 and not v.keywords and isinstance(v.args[0], ast.Call):
        m = v.args[0]
        if isinstance(m.func, ast.Name) and m.func.id == "map" and len(m.args) == 2 \
                and not m.keywords:
            return ("map", m.args[1], st.targets[0])
    return None


def _loop_split(st: ast.stmt, s: _Summary, t: Task, ctx: _Context,
                changed: dict[str, int]) -> str | None:
    """``"split"`` when the iterations of a map over items (:func:`loop_parts`) may run in
    chunks on different workers, gathered in order: the items are a variable or a
    ``range``, evaluated once per chunk without effect, and nothing in the body changes
    anything but the result (no effect, no method that may change its object, no ``:=``,
    no function that changes its arguments or globals); else why not (``None``: not such
    a statement)."""
    parts = loop_parts(st)
    if parts is None:
        return None
    kind, items, _ = parts
    collected: set[str] = set()
    if kind == "for":
        shape = for_loop_parts(st)
        if isinstance(shape, str):
            return shape
        collected = set(shape.lists) | set(shape.dicts)
        direct = _Collector(ctx)
        direct.visit(st)
        mutated = set(direct.s.mutates)
        for r in direct.s.refs:
            if r in ctx.summaries:
                mutated |= ctx.summaries[r].mutates
        if mutated - collected:
            return "it changes " + ", ".join(sorted(mutated - collected))
        # the values it collects may share objects with the names of its alias class:
        # copies made on other workers must not be told apart from them later
        shared = sorted(v for v in s.mutates if changed[v] > 1 or (
            changed[v] == 1 and v not in s.mutates))
        if shared:
            return (f"what it collects may share objects with {shared[0]}, which another "
                    "statement changes")
    for name in ("list", "map", "range"):
        if name in ctx.user_names:
            return f"{name} is redefined by the script"
    if not (isinstance(items, ast.Name) or (
            isinstance(items, ast.Call) and isinstance(items.func, ast.Name)
            and items.func.id == "range" and not items.keywords
            and all(isinstance(a, (ast.Name, ast.Constant)) for a in items.args))):
        return "the items are not a variable or a range: they would be made once per chunk"
    if t.barrier is not None:
        return f"it is a barrier ({t.barrier})"
    effects = sorted({e.kind for e in s.effects if e.mode == "w" or e.kind in (
        "output", "random", "figure", "state", "file")})
    if effects:
        return "its iterations have effects that must stay in order: " + ", ".join(effects)
    if kind != "for" and s.mutates:
        return "it changes " + ", ".join(sorted(s.mutates))
    if (t.group is not None and kind != "for") or t.replicated:
        return "it is kept on one worker, with values it shares"
    body = st.value if kind != "for" else ast.Module(body=st.body, type_ignores=[])
    for n in ast.walk(body):
        if kind == "for" and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "append" and isinstance(n.func.value, ast.Name) and \
                n.func.value.id in collected:
            continue
        if isinstance(n, ast.NamedExpr):
            return "an assignment expression (:=) binds a variable of the script"
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "it yields or awaits"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                ctx.qualname(n.func) is None and n.func.attr not in PURE_METHODS and \
                n.func.attr not in ctx.pure_user_methods:
            return f"it calls .{n.func.attr}(), which may change its object"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            fn = ctx.summaries.get(n.func.id) if n.func.id in ctx.user_callables else None
            if fn is not None and (fn.mutated_params or fn.writes or fn.mutates):
                return f"{n.func.id}() changes its arguments or the script's variables"
            if n.func.id in ctx.user_names and n.func.id not in ctx.user_callables:
                return f"{n.func.id}() is a value of the script the analysis cannot follow"
    return "split"


def _replicable_state(t: Task, kinds: set[str]) -> str | None:
    """Why a statement that sets process state cannot run on every worker (``None``: it
    can: besides the setting it only reads values, imports, prints or reads the
    environment, the working directory or ``sys.path``)."""
    if t.barrier is not None:
        return f"it is also a barrier ({t.barrier})"
    if t.group is not None:
        return "it shares values kept on one worker"
    if t.defines:
        return "it also binds or changes " + ", ".join(sorted(t.defines))
    others = kinds - {"state", "import", "output"}
    writes = {e.kind for e in t.effects if e.mode == "w"} - {"state", "import", "output"}
    if writes or others - {"env", "cwd"}:
        return "it also changes " + ", ".join(sorted(writes or others - {"env", "cwd"}))
    return None


def _mark_replicated(tasks: list[Task], edges: list[Edge], raw) -> list[Task]:
    """Imports, defs and classes that depend only on each other run on every worker."""
    preds: list[set[int]] = [set() for _ in tasks]
    for e in edges:
        preds[e.dst].add(e.src)
    ok: list[bool] = []
    out = []
    for t, (st, s) in zip(tasks, raw, strict=True):
        kinds = {e.kind for e in s.effects}
        if "state" in kinds:  # set on every worker, if nothing else it does forbids it
            good = _replicable_state(t, kinds) is None
            ok.append(good)   # a def after it may run everywhere too
            out.append(replace(t, replicated=True) if good else t)
            continue
        good = (isinstance(st, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                                ast.AsyncFunctionDef, ast.ClassDef))
                and t.barrier is None and t.group is None and kinds <= {"import"}
                and not any(e.mode == "w" and e.detail == "sys.path" for e in s.effects)
                and all(ok[p] for p in preds[t.index]))
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            good = good and not (t.mutates or kinds)
        ok.append(good)
        out.append(replace(t, replicated=True) if good else t)
    return out
