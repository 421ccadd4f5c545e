"""What autopar knows of Python's and the libraries' functions: the effect classes, and the
tables the analysis reads calls with (read-only methods, barriers, process state, files,
in-place arguments, values that cannot be pickled).

Unsure means sequential: a call the tables do not know is taken at its worst (a method
changes its object), never at its best.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

EDGE_TYPES = ("def-use", "anti", "output", "output-stream", "file", "cwd", "env", "random",
              "figure", "import", "stdin", "state", "barrier")
"""Every edge type, in the order the explanation lists them. ``output-stream`` is the
effect class ``output`` (named apart from ``output``, the write-after-write edge)."""

EFFECT_EDGE = {"output": "output-stream", "file": "file", "cwd": "cwd", "env": "env",
               "random": "random", "figure": "figure", "import": "import", "stdin": "stdin"}
"""Effect class -> the type of the edges that order its accesses (``state`` has none: a
setter of process state is a fence)."""

BUILTINS = frozenset(dir(builtins))
"""The names of the builtins (a name the script does not bind is one of them)."""

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
"""Methods that do not change the object they are called on (str, list, dict, set, NumPy,
pandas); any other method call on a name counts as a mutation of it."""

FRESH_BUILTINS = frozenset("""
len sum abs round int float str bool repr hash isinstance issubclass ord chr range
format bin oct hex divmod pow callable id ascii complex bytes type print
""".split())
"""Builtins whose result never aliases their arguments."""

BARRIER_BUILTINS = {
    "exec": "exec() runs code the analysis cannot see",
    "eval": "eval() runs code the analysis cannot see",
    "globals": "globals() exposes every variable",
    "locals": "locals() at top level exposes every variable",
    "vars": "vars() exposes every variable",
    "__import__": "__import__() imports a module chosen at run time",
    "breakpoint": "breakpoint() stops the program",
    "exit": "exit() ends the program",
    "quit": "quit() ends the program",
    "compile": "compile() makes code the analysis cannot see",
}
"""Builtins a call of which is a barrier -> the reason (``vars`` and ``locals`` only without
an argument, ``locals`` only at top level)."""

_LOG_HANDLERS = ("logging's handlers other than FileHandler and StreamHandler (rotating "
                 "files, sockets) write lines in the order they come")

BARRIER_CALLS = (
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
    ("logging.handlers.", _LOG_HANDLERS),
    ("logging.config.", _LOG_HANDLERS),
)
"""Calls that are barriers: (qualified-name prefix, the reason), the first that matches
applies."""

# Barrier reasons of what lives in one process and cannot be recreated on another: a script
# with any of them runs serially (its threads, exit handlers and children stay with it).
PROCESS_BOUND = frozenset({
    "os.fork() copies the process", "the script starts processes of its own",
    "the script starts threads of its own", "the script starts workers of its own",
    "exit handlers run at the end of the program", "signal handlers change the process",
    _LOG_HANDLERS,
})

# Barrier reasons (their beginnings) of changes to what every statement uses without naming
# it and that live in the process that runs the script: a builtin function replaced (any
# later statement may call it, and the analysis cannot follow what the new one does),
# sys's hooks and streams (sys.excepthook runs where the script fails), a module object
# taken from sys.modules (it may be any module, the script's own namespace included).
_PROCESS_BOUND_PREFIXES = ("changes builtins.", "changes sys.",
                           "changes a module taken from sys.modules")

SYS_HOOKS = frozenset({
    "excepthook", "displayhook", "unraisablehook", "breakpointhook", "stdin", "stdout",
    "stderr", "__stdin__", "__stdout__", "__stderr__", "__excepthook__", "__displayhook__",
    "__unraisablehook__", "__breakpointhook__"})
"""Attributes of ``sys`` that the interpreter (or the runner, which captures each statement's
output by replacing the streams) uses in the process that runs the script: a script that
assigns one runs serially, in one process."""

HOOK_CALLS = {
    "sys.settrace": "sys.settrace", "sys.setprofile": "sys.setprofile",
    "sys.addaudithook": "sys.addaudithook", "sys.set_asyncgen_hooks":
    "sys.set_asyncgen_hooks", "sys.stdout.reconfigure": "sys.stdout",
    "sys.stderr.reconfigure": "sys.stderr", "sys.stdin.reconfigure": "sys.stdin",
}
"""Calls that set a hook or stream of ``sys`` (qualified name -> what they change): the
script then runs serially, in one process (:func:`replaced_hook`)."""


def process_bound(reason: str) -> bool:
    """Whether a barrier reason is of something that lives in the process that runs the
    script (threads, exit handlers, replaced builtins or hooks...): a script with one runs
    serially, in one process."""
    return reason in PROCESS_BOUND or reason.startswith(_PROCESS_BOUND_PREFIXES)


def replaced_builtin(name: str | None) -> str:
    """The barrier reason of a statement that replaces (or deletes) a builtin."""
    what = f"builtins.{name}" if name else "builtins (a name chosen at run time)"
    return f"changes {what}, which any later statement may call"


def replaced_hook(name: str) -> str:
    """The barrier reason of a statement that changes a hook or stream of ``sys``."""
    return f"changes {name}, which lives in the process that runs the script"


FROM_SYS_MODULES = ("changes a module taken from sys.modules, which may be any module "
                    "(the script's own namespace included)")

MODULE_READERS = frozenset("""
getattr hasattr dir id type isinstance issubclass repr str print len hash callable format
vars ascii bool help dict list tuple set frozenset
""".split())
"""Builtins that take a module object without changing it (or only hold it)."""

STATELESS_WRAPPERS = frozenset({
    "functools.partial", "numpy.vectorize", "numpy.frompyfunc", "operator.itemgetter",
    "operator.attrgetter", "operator.methodcaller"})
"""Wrappers of a function that keep no state of their own (qualified names): calling one is
calling the function it wraps."""

STDIN_CALLS = ("fileinput.", "getpass.", "code.interact", "pdb.")
"""Calls that read the standard input (qualified-name prefixes)."""

STDIN_PATHS = frozenset({"/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"})
"""Paths that name the standard input (``open("/dev/stdin")``)."""

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
    "logging.root.": "logging's configuration",
    "gc.disable": "the garbage collector", "gc.enable": "the garbage collector",
    "gc.set_threshold": "the garbage collector", "gc.freeze": "the garbage collector",
    "os.umask": "the file mode mask", "socket.setdefaulttimeout": "the socket timeout",
    "numpy.set_string_function": "NumPy's print options",
}
"""Calls (qualified names; a trailing dot: every call below that name) that set process
state (the ``state`` effect class), with what they set. A method called on the result of
``logging.getLogger(...)`` or ``decimal.getcontext()``, and an assignment to an attribute
(or an item of an attribute) of a module, set state too."""

LOGGER_SETTERS = frozenset({"setLevel", "addHandler", "removeHandler", "addFilter",
                            "removeFilter", "disabled", "propagate"})
"""Methods of a logger (made by ``logging.getLogger``) that change logging's configuration."""

RANDOM_PURE = frozenset({"default_rng", "Generator", "RandomState", "SeedSequence", "PCG64",
                         "PCG64DXSM", "MT19937", "Philox", "SFC64", "BitGenerator",
                         "Random", "SystemRandom"})
"""Functions of ``random`` and ``numpy.random`` that make a generator of their own instead of
drawing from (or seeding) the global one."""

INPLACE_ARG = {
    "random.shuffle": 0, "numpy.random.shuffle": 0, "heapq.heappush": 0,
    "heapq.heappop": 0, "heapq.heapify": 0, "heapq.heapreplace": 0, "heapq.heappushpop": 0,
    "bisect.insort": 0, "bisect.insort_left": 0, "bisect.insort_right": 0,
    "numpy.copyto": 0, "numpy.put": 0, "numpy.place": 0, "numpy.fill_diagonal": 0,
    "numpy.putmask": 0, "json.dump": 1, "pickle.dump": 1, "numpy.save": 0,
    "numpy.savetxt": 0, "numpy.savez": 0, "csv.writer": 0, "csv.DictWriter": 0,
}
"""Functions (qualified names) that change a positional argument in place -> its index."""

FILE_CALLS = {
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
"""File functions (qualified names; a trailing ``.`` or ``_``: every name that begins so) ->
``(mode, index of the path argument or -1 when unknown)``; mode ``"?"`` counts as a write."""

FILE_METHODS = {
    "to_csv": "w", "to_json": "w", "to_parquet": "w", "to_excel": "w", "to_pickle": "w",
    "to_hdf": "w", "to_feather": "w", "to_html": "w", "savefig": "w", "write_text": "w",
    "write_bytes": "w", "read_text": "r", "read_bytes": "r", "tofile": "w", "mkdir": "w",
    "unlink": "w", "rmdir": "w", "touch": "w", "rename": "w", "replace": "w", "exists": "r",
    "is_file": "r", "is_dir": "r", "iterdir": "r", "glob": "r", "rglob": "r", "stat": "r",
}
"""Methods that read or write files (pandas, matplotlib, ``pathlib.Path``, NumPy) -> mode."""

KNOWN_MUTATORS = frozenset("""
append extend insert remove pop clear update add discard sort reverse setdefault popitem
write writelines fill resize put close flush seek truncate send throw
""".split())
"""Methods of the builtin containers and files that change their object: a method of the
script's own classes with one of these names is never taken as read-only."""

ITERATOR_CALLS = frozenset({"iter", "map", "filter", "zip", "enumerate", "reversed"})
"""Builtins that return iterators."""

UNPICKLABLE_CALLS = frozenset({
    "open", "iter", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open",
    "zipfile.ZipFile", "tarfile.open", "sqlite3.connect", "socket.socket", "csv.reader",
    "csv.writer", "csv.DictReader", "csv.DictWriter", "tempfile.TemporaryFile",
    "tempfile.NamedTemporaryFile", "threading.Lock", "threading.RLock",
})
"""Calls whose result cannot be moved between processes: their variables stay on one
worker."""


@dataclass(frozen=True)
class Effect:
    """A side effect on a shared resource: ``kind`` is the class (``output``, ``file``,
    ``cwd``, ``env``, ``random``, ``figure``, ``import``, ``stdin``, ``state``), ``detail``
    names the resource within it (a file's path, ``?`` for an unknown path) and ``mode`` is
    ``"r"`` or ``"w"``."""

    kind: str
    detail: str
    mode: str
