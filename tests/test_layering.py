"""The shape of the package: no import cycle between its parts, and one pipeline that is
the only caller of the executor core."""

from __future__ import annotations

import ast
import os
import pathlib
import tempfile
from collections.abc import Iterator
from operator import add

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime import core

ROOT = pathlib.Path(tg.__file__).parent


def _part(module: str) -> str | None:
    """'tilegraph.array.core' -> 'array'; 'tilegraph.pipeline' -> 'pipeline'."""
    bits = module.split(".")
    return bits[1] if len(bits) > 1 and bits[0] == "tilegraph" else None


def _module_of(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path) -> list[tuple[str, int]]:
    """Every module a file imports (function-level imports included, those under
    ``if TYPE_CHECKING:`` left out: they never run), with its line."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for b in node.body for n in ast.walk(b)}
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, node.lineno))
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


def _part_graph() -> dict[str, dict[str, str]]:
    """part -> {imported part: 'file:line' of one import that makes the edge}."""
    parts = {p.stem if p.is_file() else p.name for p in ROOT.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    edges: dict[str, dict[str, str]] = {}
    for path in ROOT.rglob("*.py"):
        src = _part(_module_of(path))
        if src is None:  # tilegraph/__init__.py gathers the public API from every part
            continue
        for name, line in _imports(path):
            dst = _part(name)
            if dst and dst != src and dst in parts:
                edges.setdefault(src, {}).setdefault(dst, f"{path.relative_to(ROOT)}:{line}")
    return edges


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_parts():
    edges = _part_graph()
    cycles = _cycles(edges)
    detail = [
        " <-> ".join(c) + ": " + "; ".join(
            f"{a}->{b} ({edges[a][b]})" for a in c for b in c if b in edges.get(a, {}))
        for c in cycles]
    assert not cycles, "import cycles between tilegraph's parts:\n" + "\n".join(detail)


def _module_graph(package: str, with_package: bool = False) -> dict[str, dict[str, str]]:
    """module -> {imported module: 'file:line' of one import that makes the edge}, among the
    modules of ``package`` (e.g. 'tilegraph.runtime'), function-level imports included. An
    imported name is the module it names, or the module that defines it. ``with_package``:
    the package's ``__init__`` is one of the modules (``from package import x`` is an edge
    to it)."""
    modules = {_module_of(path): path for path in ROOT.rglob("*.py")}

    def inside(module: str) -> bool:
        return module.startswith(package + ".") or (with_package and module == package)

    edges: dict[str, dict[str, str]] = {}
    for src, path in modules.items():
        if not inside(src):
            continue
        for name, line in _imports(path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if inside(name) and name != src:
                edges.setdefault(src, {}).setdefault(name, f"{path.relative_to(ROOT)}:{line}")
    return edges


FRONT_ENDS = ("array", "lambdapack", "autopar", "service", "interop", "workloads")


def test_the_runtime_imports_no_front_end():
    """No module of tilegraph/runtime imports a front end, not even inside a function: a
    backend runs TaskGraphs and implicit graphs (tilegraph.graph.implicit) without knowing
    which front end made them."""
    offenders = []
    for path in sorted((ROOT / "runtime").rglob("*.py")):
        for name, line in _imports(path):
            if _part(name) in FRONT_ENDS:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not offenders, "the runtime imports front ends:\n" + "\n".join(offenders)


def test_nothing_in_the_package_imports_the_test_beds():
    """``tilegraph.testing`` (the emulated hosts of the tests and benchmarks) is imported by
    no other part of the package, not even inside a function."""
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for path in sorted(ROOT.rglob("*.py")) if "testing" not in path.parts
                 for name, line in _imports(path) if _part(name) == "testing"]
    assert not offenders, "the package imports its test beds:\n" + "\n".join(offenders)


def _cycle_detail(edges: dict[str, dict[str, str]], cycles: list[list[str]]) -> list[str]:
    return [" <-> ".join(c) + ": " + "; ".join(
        f"{a}->{b} ({edges[a][b]})" for a in c for b in c if b in edges.get(a, {}))
        for c in cycles]


def test_no_import_cycle_among_any_modules():
    """No two modules of the package import each other, directly or through others, even
    inside a function (the subpackages' ``__init__`` are modules too; the top package,
    which loads its names when first used, is not)."""
    edges = _module_graph("tilegraph")
    assert "tilegraph.graph.taskgraph" in edges.get("tilegraph.graph.dask_spec", {})
    cycles = _cycles(edges)
    assert not cycles, ("import cycles among tilegraph's modules:\n"
                        + "\n".join(_cycle_detail(edges, cycles)))


def test_the_planner_imports_nothing_from_the_runtime():
    """plan/ (cull, place, fuse, order, projections) reads the graph and its memory model
    (graph/), never the runtime, at any level."""
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {name}"
                 for path in (ROOT / "plan").rglob("*.py")
                 for name, line in _imports(path)
                 if name == "tilegraph.runtime" or name.startswith("tilegraph.runtime.")]
    assert not offenders, "\n".join(offenders)


def test_no_import_cycle_among_the_runtime_modules():
    edges = _module_graph("tilegraph.runtime")
    assert "tilegraph.runtime.core" in edges.get("tilegraph.runtime.backends", {})
    cycles = _cycles(edges)
    assert not cycles, ("import cycles among tilegraph.runtime's modules:\n"
                        + "\n".join(_cycle_detail(edges, cycles)))


def test_no_import_cycle_among_the_array_modules():
    """The op modules import the core and each other, never the package (which imports
    them all); the package's table binds them onto Array."""
    edges = _module_graph("tilegraph.array", with_package=True)
    assert "tilegraph.array.core" in edges.get("tilegraph.array.reductions", {})
    cycles = _cycles(edges)
    assert not cycles, ("import cycles among tilegraph.array's modules:\n"
                        + "\n".join(_cycle_detail(edges, cycles)))


def test_the_array_core_imports_no_operation():
    """array/core.py (the Array: graph node, shape, chunks, dtype, compute plumbing) imports
    no op module, not even inside a function: the ops import the core."""
    edges = _module_graph("tilegraph.array", with_package=True)
    core_imports = edges.get("tilegraph.array.core", {})
    allowed = {"tilegraph.array.chunks", "tilegraph.array.lowering"}
    extra = {m: where for m, where in core_imports.items() if m not in allowed}
    assert not extra, f"tilegraph.array.core imports operations: {extra}"


def test_every_array_method_comes_from_the_one_table():
    from tilegraph.array import api_table
    from tilegraph.array.core import Array

    assert {"__getitem__", "__add__", "__matmul__", "__array_ufunc__", "__array_function__",
            "sum", "T", "reshape", "astype", "rechunk", "map_blocks", "map_overlap",
            "__dask_graph__"} <= set(api_table.TABLE)
    for name, value in api_table.TABLE.items():
        assert Array.__dict__[name] is value, name


def test_optional_backends_register_themselves_when_asked_for():
    import subprocess
    import sys

    code = ("import sys\n"
            "from tilegraph.runtime.backends import BACKENDS, make_backend\n"
            "assert BACKENDS['dask'] == 'tilegraph.runtime.dask_backend'\n"
            "assert 'tilegraph.runtime.dask_backend' not in sys.modules\n"
            "try:\n    make_backend('nosuch')\nexcept ValueError as e:\n"
            "    assert 'dask, mpi, serverless, sync, threads' in str(e), e\n"
            "from tilegraph.runtime import dask_backend\n"
            "assert BACKENDS['dask'] is dask_backend._make_backend\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT.parent, timeout=120)
    assert done.returncode == 0, done.stderr


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": ""}, "b": {}}) == []


def test_only_the_pipeline_and_the_runtime_use_the_executor_and_backends():
    offenders = []
    for path in ROOT.rglob("*.py"):
        module = _module_of(path)
        if module == "tilegraph.pipeline" or module.startswith("tilegraph.runtime"):
            continue
        for name, line in _imports(path):
            if name in ("tilegraph.runtime.core", "tilegraph.runtime.core.Execution",
                        "tilegraph.runtime.backends.make_backend",
                        "tilegraph.runtime.backends.create_backend",
                        "tilegraph.runtime.Execution", "tilegraph.runtime.make_backend"):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not offenders, "\n".join(offenders)


@pytest.fixture
def callers(monkeypatch):
    """The modules that construct an Execution while the test runs."""
    import inspect

    seen: list[str] = []
    original = core.Execution.__init__

    def spy(self, *args, **kwargs):
        seen.append(inspect.currentframe().f_back.f_globals["__name__"])
        original(self, *args, **kwargs)

    monkeypatch.setattr(core.Execution, "__init__", spy)
    return seen


def test_every_front_end_runs_through_the_pipeline(callers):
    x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
    assert np.allclose(x.compute(), np.arange(12.0).reshape(3, 4))
    tg.compute(x.sum(), x.max())
    assert tg.get({"a": 1, "b": (add, "a", 1)}, "b") == 2
    graph = tg.GraphBuilder()
    graph.add("a", add, args=(1, 2))
    assert tg.run(graph.build(), ["a"]) == [3]
    (y,) = tg.while_loop(lambda v: v.max() > 1, lambda v: (v / 2,),
                         [tg.from_numpy(np.array([8.0, 2.0]), chunks=1)])
    assert np.allclose(y.compute(), [1.0, 0.25])
    with tempfile.TemporaryDirectory() as d:
        tg.to_npy(x, os.path.join(d, "x.npy"))
        tg.to_zarr(x, os.path.join(d, "x.zarr"))
        assert np.allclose(np.load(os.path.join(d, "x.npy")), x.compute())
    s = tg.from_scipy(__import__("scipy.sparse").sparse.eye(4, format="csr"), chunks=2)
    assert s.compute().nnz == 4
    assert len(callers) >= 10
    assert set(callers) == {"tilegraph.pipeline"}, callers


def test_the_package_loads_its_names_when_first_used():
    import subprocess
    import sys

    code = ("import sys, tilegraph, tilegraph.autopar.runner\n"
            "assert 'tilegraph.array' not in sys.modules, 'arrays imported'\n"
            "assert 'scipy' not in sys.modules, 'scipy imported'\n"
            "z = tilegraph.zeros\n"
            "assert 'tilegraph.array' in sys.modules and z is tilegraph.array.zeros\n"
            "assert tilegraph.linalg is tilegraph.array.linalg and 'zeros' in dir(tilegraph)\n"
            "assert tilegraph.get is __import__('tilegraph.pipeline').pipeline.get\n"
            "try:\n    tilegraph.nosuch\nexcept AttributeError as e:\n"
            "    assert \"no attribute 'nosuch'\" in str(e)\nelse:\n    raise SystemExit(1)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT.parent, timeout=120)
    assert done.returncode == 0, done.stderr


def _assignments_to(attribute: str) -> list[str]:
    """'file:Class' of every assignment to ``attribute`` in the package: in a class body
    (``collective = ...``) or to an object's attribute (``self.collective = ...``)."""
    found = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                targets = (node.targets if isinstance(node, ast.Assign) else
                           [node.target] if isinstance(node, ast.AnnAssign) else [])
                for t in targets:
                    if ((isinstance(t, ast.Name) and t.id == attribute and node in cls.body)
                            or (isinstance(t, ast.Attribute) and t.attr == attribute)):
                        found.append(f"{path.relative_to(ROOT)}:{cls.name}")
    return sorted(set(found))


def test_only_the_mpi_backend_carries_the_collective_steps():
    """The steps the processes of a run take together (check_same_plan, decide, gather,
    all_ready, share_results) are one optional object, ``Backend.collective``: ``None`` on
    every backend but MPI's, whose ranks each run the pipeline."""
    import tilegraph.autopar.processes as autopar_processes
    import tilegraph.runtime.dask_backend as dask_backend
    import tilegraph.runtime.mpi as mpi
    import tilegraph.runtime.serverless.backend as serverless
    from tilegraph.runtime import backends

    collective_steps = {"check_same_plan", "decide", "gather", "all_ready", "share_results"}
    assert backends.Collective.__abstractmethods__ == collective_steps
    assert collective_steps.isdisjoint(dir(backends.Backend))
    assert backends.Backend.collective is None
    for cls in (backends.SyncBackend, backends.ThreadsBackend, dask_backend.DaskBackend,
                serverless.ServerlessBackend, autopar_processes.ProcessesBackend):
        assert cls.collective is None, cls
        assert collective_steps.isdisjoint(dir(cls)), cls
    assert backends.ThreadsBackend(2).collective is None
    assert [c.__name__ for c in backends.Collective.__subclasses__()] == ["RankCollective"]
    assert mpi.RankCollective.__module__ == "tilegraph.runtime.mpi"
    assert mpi.MPIBackend.__annotations__["collective"] == "RankCollective"
    assert _assignments_to("collective") == ["runtime/backends.py:Backend",
                                             "runtime/mpi.py:MPIBackend"]


def test_a_backend_is_run_partition_and_transport():
    """The seam is narrow: a Backend drives the run (``run``, abstract) and answers
    ``partition`` and ``transport``; everything else is optional (``collective``, and the
    capabilities the pipeline uses when a backend has them: ``task_policy``,
    ``place_tasks``, ``run_implicit``, a transport's ``progress``)."""
    from tilegraph.runtime.backends import Backend

    methods = {name for name, value in vars(Backend).items()
               if callable(value) and not name.startswith("_")}
    assert methods == {"run", "partition", "transport"}
    assert Backend.__abstractmethods__ == {"run"}


def _is_private(name: str) -> bool:
    """``_x`` is private; a dunder (``__all__``, ``__version__``) is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(source: str, module: str, modules: set[str], is_package: bool = False
                  ) -> list[tuple[int, str]]:
    """``(line, 'tilegraph.x._name')`` of every private name of another module of the
    package that ``source`` (the text of ``module``, an ``__init__`` when ``is_package``)
    uses: imported (``from tilegraph.x import _name``, relative imports and those under
    ``if TYPE_CHECKING:`` too) or read as an attribute of a module it imported
    (``x._name``, ``tilegraph.x._name``)."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    bound: dict[str, str] = {}   # local name -> the module of the package it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tilegraph":
                    if a.asname:
                        bound[a.asname] = a.name
                    else:
                        bound["tilegraph"] = "tilegraph"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            if base.split(".")[0] != "tilegraph":
                continue
            for a in node.names:
                if f"{base}.{a.name}" in modules:
                    bound[a.asname or a.name] = f"{base}.{a.name}"
                if _is_private(a.name) and base != module:
                    found.append((node.lineno, f"{base}.{a.name}"))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        parts, root = [], node.value
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        if not isinstance(root, ast.Name) or root.id not in bound:
            continue
        target: str | None = bound[root.id]
        for part in reversed(parts):
            target = f"{target}.{part}" if f"{target}.{part}" in modules else None
            if target is None:
                break
        if target is not None and target != module:
            found.append((node.lineno, f"{target}.{node.attr}"))
    return sorted(found)


def test_the_private_name_finder_finds_private_names():
    modules = {"tilegraph", "tilegraph.a", "tilegraph.a.b", "tilegraph.a.c"}
    source = ("from typing import TYPE_CHECKING\n"
              "from tilegraph.a.c import public, _hidden, __version__\n"
              "from . import c\n"
              "from .c import _relative\n"
              "import tilegraph.a.c as other\n"
              "import tilegraph\n"
              "if TYPE_CHECKING:\n    from tilegraph.a.c import _Typed\n"
              "x = other._attr + c._attr2 + tilegraph.a.c._deep + other.public\n"
              "y = _own + self._method() + c.__doc__\n")
    assert _private_uses(source, "tilegraph.a.b", modules) == [
        (2, "tilegraph.a.c._hidden"), (4, "tilegraph.a.c._relative"),
        (8, "tilegraph.a.c._Typed"), (9, "tilegraph.a.c._attr"), (9, "tilegraph.a.c._attr2"),
        (9, "tilegraph.a.c._deep")]
    assert _private_uses("from tilegraph.a.b import _mine\n", "tilegraph.a.b", modules) == []


PACKAGES = [*sorted(p.name for p in ROOT.iterdir()
                    if p.is_dir() and (p / "__init__.py").exists()), "."]


def _files(package: str) -> list:
    """The modules of ``package`` (``"."``: those at the top of tilegraph itself)."""
    if package == ".":
        return sorted(ROOT.glob("*.py"))
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_uses_a_private_name_of_another_module(package):
    """What one module of tilegraph needs of another module of tilegraph is a public name
    of the module whose job it is (with a docstring), never a private one: the analysis of
    a script is split by job (effects, astnames, held, summary, context, values, calls,
    collector, functions, edges, groups, loopsplit, analysis), the array functions by what
    they build (creation, slicing, padding, product plans, the sparse block kernels, ...),
    and a newcomer finds each job's interface in its module."""
    modules = {_module_of(p) for p in ROOT.rglob("*.py")}
    offenders = [f"{path.relative_to(ROOT)}:{line} uses {name}"
                 for path in _files(package)
                 for line, name in _private_uses(path.read_text(), _module_of(path), modules,
                                                 path.name == "__init__.py")]
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_or_function_is_too_long(package):
    """No module of tilegraph is over 700 lines, and no function over 100: when one grows
    past that, it is split by job. The exceptions are LambdaPACK programs (a function under
    ``@_deferred`` in lambdapack/library.py is a program of the loop language, kept as
    numpywren wrote it, not Python that runs)."""
    long_modules, long_functions = [], []
    for path in _files(package):
        text = path.read_text()
        if len(text.splitlines()) > 700:
            long_modules.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not any(
                    isinstance(d, ast.Name) and d.id == "_deferred"
                    for d in node.decorator_list):
                length = node.end_lineno - node.lineno + 1
                if length > 100:
                    long_functions.append(f"{path.relative_to(ROOT)}:{node.lineno} "
                                          f"{node.name}: {length} lines")
    assert not long_modules + long_functions, "\n".join(long_modules + long_functions)


SEAM_METHODS = ("partition", "transport", "run")


def _base_names(cls: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else b.attr for b in cls.bases
            if isinstance(b, (ast.Name, ast.Attribute))}


def _backend_classes(trees: dict[str, ast.Module]) -> dict[str, tuple[str, ast.ClassDef]]:
    """Class name -> (file, class) of ``Backend`` and of every class deriving from it (by
    the names of its bases, through any number of levels) in ``trees`` (file -> AST)."""
    classes = [(f, c) for f, tree in trees.items() for c in ast.walk(tree)
               if isinstance(c, ast.ClassDef)]
    found = {c.name: (f, c) for f, c in classes if c.name == "Backend"}
    grew = True
    while grew:
        grew = False
        for f, c in classes:
            if c.name not in found and _base_names(c) & set(found):
                found[c.name] = (f, c)
                grew = True
    return found


def _self_targets(target: ast.AST) -> bool:
    """Whether an assignment target is (a part of) an attribute of ``self``."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_self_targets(t) for t in target.elts)
    if isinstance(target, ast.Starred):
        return _self_targets(target.value)
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
        if isinstance(target, ast.Name) and target.id == "self":
            return True
    return False


def _nodes_of(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function, nested functions included, nested classes (whose ``self``
    is another object) left out."""
    for node in ast.iter_child_nodes(fn):
        if isinstance(node, ast.ClassDef):
            continue
        yield node
        yield from _nodes_of(node)


def _writes_to_self(fn: ast.AST) -> list[int]:
    """Lines of ``fn`` that assign to (or delete) an attribute of ``self``, or set one by
    ``setattr(self, ...)``."""
    lines = []
    for node in _nodes_of(fn):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name)
              and node.args[0].id == "self"
              and ((isinstance(node.func, ast.Name) and node.func.id == "setattr")
                   or (isinstance(node.func, ast.Attribute)
                       and node.func.attr == "__setattr__"))):
            lines.append(node.lineno)
        if any(_self_targets(t) for t in targets):
            lines.append(node.lineno)
    return lines


def _run_state_on_backends(trees: dict[str, ast.Module]) -> tuple[list[str], set[str]]:
    """Every place where a backend's ``partition``, ``transport`` or ``run`` (or a method
    of the backend they use, ``self._helper``) sets an attribute of the backend object:
    ``'file:Class.method:line'``; and the backend classes looked at."""
    classes = _backend_classes(trees)
    offenders = []
    for name, (path, cls) in classes.items():
        methods: dict[str, ast.FunctionDef] = {}
        for base in _base_names(cls) & set(classes):  # inherited helpers, one level up
            methods.update({m.name: m for m in classes[base][1].body
                            if isinstance(m, ast.FunctionDef)})
        methods.update({m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)})
        todo = [m for m in cls.body if isinstance(m, ast.FunctionDef)
                and m.name in SEAM_METHODS]
        seen = {m.name for m in todo}
        while todo:
            fn = todo.pop()
            offenders += [f"{path}:{name}.{fn.name}:{line}" for line in _writes_to_self(fn)]
            for node in _nodes_of(fn):  # the methods it calls or hands on (self._drive)
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id == "self" and node.attr in methods
                        and node.attr not in seen):
                    seen.add(node.attr)
                    todo.append(methods[node.attr])
    return sorted(offenders), set(classes)


def test_backends_keep_no_run_on_themselves():
    """A run's state lives in the partition its backend made for it (and in its
    transport), never on the backend object: no ``partition``, ``transport`` or ``run`` of
    any backend, nor a method of the backend they use, sets an attribute of ``self``. So
    one backend object runs several plans, interleaved or at once
    (``tests/runtime/test_seam.py``)."""
    trees = {str(path.relative_to(ROOT)): ast.parse(path.read_text())
             for path in ROOT.rglob("*.py")}
    offenders, looked_at = _run_state_on_backends(trees)
    assert not offenders, "\n".join(offenders)
    assert {"Backend", "SyncBackend", "ThreadsBackend", "MPIBackend", "ServerlessBackend",
            "DaskBackend", "ProcessesBackend"} <= looked_at


def test_the_run_state_rule_finds_a_backend_that_keeps_a_run():
    source = '''
class Mine(ThreadsBackend):
    def partition(self, graph, outputs, priority):
        self._note(graph)
        return Partition(graph, outputs, priority)

    def _note(self, graph):
        self.graphs[len(graph)] = graph

    def transport(self, part):
        self.count += 1

    def run(self, part, execution):
        ThreadsBackend.run(self, part, execution)
        threading.Thread(target=self._loop).start()
        setattr(self, "last", part)
        (self.a, b), c = (1, 2), 3
        local = 1
        self.workers_of(part).x = local  # another object: allowed

    def _loop(self):
        def inner():
            self.done = True
        inner()

class Unrelated:
    def run(self, part, execution):
        self.x = 1
'''
    backends_src = 'class Backend:\n    pass\nclass ThreadsBackend(Backend):\n    pass\n'
    offenders, looked_at = _run_state_on_backends({"a.py": ast.parse(source),
                                                   "b.py": ast.parse(backends_src)})
    assert looked_at == {"Backend", "ThreadsBackend", "Mine"}
    assert offenders == sorted(["a.py:Mine._note:8", "a.py:Mine.transport:11",
                                "a.py:Mine.run:16", "a.py:Mine.run:17",
                                "a.py:Mine._loop:23"])


_BUILDER_PARAMS = frozenset(("key", "keys", "func", "deps", "args", "kwargs", "value"))


def _meta_holder(node: ast.AST) -> bool:
    """Whether ``node`` names a dict of metadata columns: ``meta``, ``x.meta``,
    ``self._meta``."""
    return ((isinstance(node, ast.Name) and node.id in ("meta", "_meta"))
            or (isinstance(node, ast.Attribute) and node.attr in ("meta", "_meta")))


def _column_readers(trees: dict[str, ast.Module]) -> dict[tuple[str, str], dict]:
    """The package's functions that take column names from their callers, by (module,
    name): those with ``**meta`` (they hand it to a GraphBuilder; any keyword but their
    own parameters is a column) and those that look up a parameter in a graph's ``meta``
    (``column(graph, "nbytes")``: the argument at that position is a column)."""
    found: dict[tuple[str, str], dict] = {}
    for module, tree in trees.items():
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            a = fn.args
            params = [p.arg for p in (*a.posonlyargs, *a.args)]
            own = {*params, *(p.arg for p in a.kwonlyargs)}
            if a.kwarg is not None and a.kwarg.arg == "meta":
                found[(module, fn.name)] = {"meta_kwargs": own}
                continue
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "get" and _meta_holder(node.func.value)
                        and node.args and isinstance(node.args[0], ast.Name)
                        and node.args[0].id in params):
                    name = node.args[0].id
                    found[(module, fn.name)] = {"param": name, "pos": params.index(name)}
    return found


def _columns_used(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """Every metadata column the package writes or reads, by name -> {'file:line'}: a
    string key of a dict of columns (``meta["x"]``, ``meta.get("x")``, ``setdefault``,
    ``pop``, ``"x" in meta``, a ``meta = {"x": ...}`` literal), a keyword of
    ``with_meta`` and of a GraphBuilder's ``add``/``add_many``/``add_data`` (a call on a
    name ending in ``builder`` or one passing ``deps=``/``args=``/``kwargs=``), and a
    column named to the package's functions that pass names on (:func:`_column_readers`:
    resolved through each file's imports, so ``np.add(out=)`` and an array's
    ``map_blocks(dtype=)`` are not taken for columns)."""
    readers = _column_readers(trees)
    used: dict[str, set[str]] = {}

    def use(name: object, where: str) -> None:
        if isinstance(name, str):
            used.setdefault(name, set()).add(where)

    for module, tree in trees.items():
        local = {name: (m, name) for (m, name) in readers if m == module}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if (node.module, alias.name) in readers:
                        local[alias.asname or alias.name] = (node.module, alias.name)
        for node in ast.walk(tree):
            where = f"{module}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Subscript) and _meta_holder(node.value) and isinstance(
                    node.slice, ast.Constant):
                use(node.slice.value, where)
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and any(
                    _meta_holder(c) for c in node.comparators):
                use(node.left.value, where)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                    _meta_holder(t) for t in node.targets):
                for k in node.value.keys:
                    if isinstance(k, ast.Constant):
                        use(k.value, where)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            keywords = [k.arg for k in node.keywords if k.arg is not None]
            if (isinstance(func, ast.Attribute) and _meta_holder(func.value)
                    and func.attr in ("get", "setdefault", "pop") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                use(node.args[0].value, where)
            elif name == "with_meta":
                for k in keywords:
                    use(k, where)
            elif name in ("add", "add_many", "add_data") and (
                    (isinstance(func, ast.Attribute)
                     and ast.unparse(func.value).lower().endswith("builder"))
                    or {"deps", "args", "kwargs"} & set(keywords)):
                for k in keywords:
                    if k not in _BUILDER_PARAMS:
                        use(k, where)
            if not (isinstance(func, ast.Name) and func.id in local):
                continue
            rule = readers[local[func.id]]
            if "meta_kwargs" in rule:
                for k in keywords:
                    if k not in rule["meta_kwargs"]:
                        use(k, where)
            else:
                pos, param = rule["pos"], rule["param"]
                given = ([node.args[pos]] if len(node.args) > pos else
                         [k.value for k in node.keywords if k.arg == param])
                for g in given:
                    if isinstance(g, ast.Constant):
                        use(g.value, where)
    return used


def _package_trees() -> dict[str, ast.Module]:
    return {_module_of(p): ast.parse(p.read_text()) for p in ROOT.rglob("*.py")}


def test_every_metadata_column_is_declared():
    """One schema declares the graph's metadata columns (name, type, meaning, writer):
    every column the package writes or reads is in it, and every declared column is used
    (a stale declaration would mislead a reader)."""
    from tilegraph.graph.taskgraph import META_COLUMNS, META_SCHEMA, TaskMeta

    declared = {c.name: c for c in META_SCHEMA}
    assert len(declared) == len(META_SCHEMA), "a column is declared twice"
    for c in META_SCHEMA:
        assert c.type and c.meaning and c.writer, c
    assert TaskMeta._fields == META_COLUMNS
    used = _columns_used(_package_trees())
    undeclared = {k: sorted(v)[:3] for k, v in used.items() if k not in declared}
    assert not undeclared, f"metadata columns used but not declared in META_SCHEMA: {undeclared}"
    assert sorted(set(declared) - set(used)) == []
    # the fusion columns and the builder's are all seen where they are written
    for column in ("overwrites", "remake", "step_working", "chain_blockwise", "worker",
                   "serial", "line"):
        assert column in used, column


def test_the_column_scan_finds_each_way_of_writing_a_column():
    """The scan behind the schema test sees a column however it is written or read (so
    that test can fail), and takes no other keyword or key for one."""
    source = '''
from tilegraph.algebra.blocks import source as src
from tilegraph.plan.cost import column
import numpy as np
def f(graph, builder, b, meta):
    graph.meta["sub_read"]
    meta["sub_write"] = 1
    graph.meta.get("got")
    meta.setdefault("defaulted", [])
    if "tested" in graph.meta:
        pass
    graph.with_meta(placed=[1])
    builder.add_data("k", 1, via_builder=3)
    b.add("k", len, deps=["j"], via_add=2)
    src("x", (1,), None, via_forwarder=1)
    column(graph, "via_reader")
    np.add(1, 2, out=None)
    b.add(3)
    meta = {"literal": 1}
'''
    trees = {**_package_trees(), "scratch": ast.parse(source)}
    used = {k for k, where in _columns_used(trees).items()
            if any(w.startswith("scratch:") for w in where)}
    assert used == {"sub_read", "sub_write", "got", "defaulted", "tested", "placed",
                    "via_builder", "via_add", "via_forwarder", "via_reader", "literal"}


def _uses_of(tree: ast.AST, names: set[str]) -> dict[str, int]:
    """Attribute name -> first line, of every attribute read, written or called on one of
    ``names`` (a local ``ex``) or on ``self.<name>`` (``self.ex``) in ``tree``."""
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if ((isinstance(base, ast.Name) and base.id in names)
                or (isinstance(base, ast.Attribute) and base.attr in names
                    and isinstance(base.value, ast.Name) and base.value.id == "self")):
            found.setdefault(node.attr, node.lineno)
    return found


def _protocol_names(cls: type) -> set[str]:
    return set(cls.__annotations__) | {name for name, value in vars(cls).items()
                                       if callable(value) and not name.startswith("_")}


def test_the_memory_manager_touches_only_the_declared_names_of_its_execution():
    """The memory manager reads and calls of its execution only the names of
    ``ExecutorView`` (written down in the module docstring), and the execution has each of
    them; the executor core touches only the manager's public names."""
    from tilegraph.runtime import memory

    declared = _protocol_names(memory.ExecutorView)
    assert declared == {"lock", "results", "priority", "nrunning", "running", "finished",
                        "deps", "pinned", "last_reads", "next_use", "next_ready", "is_held",
                        "idle_wait", "wait", "wake_all", "fail", "run_again"}
    documented = {line.split("``")[1].split("(")[0]
                  for line in memory.__doc__.splitlines() if line.startswith("``")}
    assert documented == declared
    source = ROOT / "runtime" / "memory.py"
    used = _uses_of(ast.parse(source.read_text()), {"ex"})
    undeclared = {name: f"runtime/memory.py:{line}" for name, line in used.items()
                  if name not in declared}
    assert not undeclared, f"the memory manager reaches into its execution: {undeclared}"
    assert set(used) == declared  # nothing declared that it does not use
    ex = core.Execution(tg.GraphBuilder().build(), [], np.zeros(0, dtype=np.int64))
    missing = [name for name in declared if not hasattr(ex, name)]
    assert not missing, f"Execution lacks {missing}"
    # the other way: the core uses the manager's public names only
    core_uses = _uses_of(ast.parse((ROOT / "runtime" / "core.py").read_text()), {"memory"})
    private = sorted(name for name in core_uses if name.startswith("_"))
    assert not private, f"the executor core reaches into its memory manager: {private}"
    unknown = sorted(name for name in core_uses if not hasattr(ex.memory, name))
    assert not unknown, unknown
