"""Task grids on their own: the records and graph structure of loop programs (a small tiled
Cholesky) without running them, the in-place rule, errors, and values against NumPy/SciPy
with uneven edge blocks in float32, float64 and complex128."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.linalg

from tilegraph import from_numpy
from tilegraph.algebra import Kernel, lower, task_grid
from tilegraph.algebra import linalg_kernels as kern
from tilegraph.algebra.grid import TaskGrid, run_program
from tilegraph.array.core import Array
from tilegraph.array.linalg import lu_program
from tilegraph.graph import Dep, GraphBuilder
from tilegraph.graph.kinds import matmul_flops, potrf_flops, syrk_flops, trsm_flops

POTRF = Kernel(kern.potrf, "potrf", "potrf")
TRSM_RIGHT = Kernel(kern.trsm, "trsm", "trsm", {"side": "R", "lower": True, "trans": "C"},
                    overwrites=1)
SYRK = Kernel(kern.herk_update, "syrk", "syrk", overwrites=0)
GEMM_NC = Kernel(kern.gemm_update, "gemm", "gemm", {"trans_b": "C"}, overwrites=0)
ZEROS = Kernel(kern.zeros, "creation", "zeros")


def cholesky_program(chunks: tuple[int, ...], dtype: np.dtype):
    """Right-looking tiled Cholesky as a task-grid program: work tiles ``("A", i, j)`` start
    as the matrix's blocks and are updated in place; output tiles ``("L", i, j)``."""
    nb = len(chunks)
    isz = dtype.itemsize

    def program(g: TaskGrid) -> None:
        call = g.call
        for k in range(nb):
            bk = chunks[k]
            call(POTRF, ("L", k, k), [("A", k, k)], kwargs={"where": (k, k)},
                 flops=potrf_flops(bk), nbytes=isz * bk * bk)
            for i in range(k + 1, nb):
                call(TRSM_RIGHT, ("L", i, k), [("L", k, k), ("A", i, k)],
                     flops=trsm_flops(chunks[i], bk), nbytes=isz * chunks[i] * bk)
            for j in range(k + 1, nb):
                cj = chunks[j]
                call(SYRK, ("A", j, j), [("A", j, j), ("L", j, k)], flops=syrk_flops(cj, bk),
                     nbytes=isz * cj * cj)
                for i in range(j + 1, nb):
                    call(GEMM_NC, ("A", i, j), [("A", i, j), ("L", i, k), ("L", j, k)],
                         flops=matmul_flops(chunks[i], bk, cj), nbytes=isz * chunks[i] * cj)
        for i in range(nb):
            for j in range(i + 1, nb):
                g.call(ZEROS, ("L", i, j), args=((chunks[i], chunks[j]), dtype),
                       nbytes=isz * chunks[i] * chunks[j])

    return program


def _record(program, sources=None, outputs=()) -> TaskGrid:
    return run_program("t", program, outputs, sources, keep_records=True)


def _spd(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.random((n, n))
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if np.dtype(dtype) == np.float32 \
        else dict(rtol=1e-9, atol=1e-9)


# -- structure, without running --------------------------------------------------------------


def test_cholesky_program_records_one_task_per_statement():
    a = from_numpy(np.eye(10), chunks=((4, 4, 2), (4, 4, 2)))
    g = _record(cholesky_program((4, 4, 2), np.dtype(np.float64)), {"A": a.collection},
                [("L", (3, 3))])
    recs = g.records
    assert len(recs) == 13
    assert Counter(r.kind for r in recs) == {"potrf": 3, "trsm": 3, "syrk": 3, "gemm": 1,
                                             "creation": 3}
    # potrf of the first block reads the source block (version 0) and writes L[0, 0]
    assert recs[0].out == (("L", 0, 0), 1) and recs[0].reads == ((("A", 0, 0), 0),)
    trsm = [r for r in recs if r.kind == "trsm"]
    assert trsm[0].reads == ((("L", 0, 0), 1), (("A", 1, 0), 0))
    # the gemm of step 0 updates A[2, 1] from the solved blocks L[2, 0] and L[1, 0]
    (gemm,) = [r for r in recs if r.kind == "gemm"]
    assert gemm.out == (("A", 2, 1), 1)
    assert gemm.reads == ((("A", 2, 1), 0), (("L", 2, 0), 1), (("L", 1, 0), 1))
    assert gemm.flops == 2 * 2 * 4 * 4 and gemm.nbytes == 8 * 2 * 4
    # A[2, 2] is updated at steps 0 and 1, then factored into L[2, 2]
    assert g.version(("A", 2, 2)) == 2 and g.version(("L", 2, 2)) == 1
    (last,) = [r for r in recs if r.out[0] == ("L", 2, 2)]
    assert last.reads == ((("A", 2, 2), 2),)


def test_cholesky_grid_lowers_with_keys_deps_coords_and_copy_flags():
    a = from_numpy(np.eye(10), chunks=((4, 4, 2), (4, 4, 2)))
    (low,) = task_grid("chol", cholesky_program((4, 4, 2), np.dtype(np.float64)),
                       [("L", (3, 3))], sources={"A": a.collection})
    graph = lower([low]).build()
    assert len(graph) - a.collection.ntasks == low.ntasks == 13
    final = ("chol-L", 2, 2)
    assert low.key((2, 2)) == final and final in graph
    # the last potrf reads the second syrk update of A[2, 2], which read the first
    assert graph.dependencies(final) == [("chol-A", 2, 2, 2)]
    assert graph.dependencies(("chol-A", 2, 2, 2)) == [("chol-A", 2, 2, 1), ("chol-L", 2, 1)]
    meta = graph.task_meta(("chol-A", 2, 1, 1))
    assert (meta.kind, meta.name, meta.coords, meta.cost) == ("gemm", "gemm", (2, 1), 64)
    assert graph.task_meta(("chol-L", 2, 1)).coords == (2, 1)
    # updates of the source blocks copy; later updates of the grid's own versions do not
    kwargs = {graph.keys[i]: kw for i, kw in graph.kwargs.items()}
    assert kwargs[("chol-A", 1, 1, 1)] == {"copy": True}
    assert kwargs[("chol-A", 2, 2, 2)] == {"copy": False}
    assert kwargs[("chol-L", 2, 1)]["copy"] is False  # trsm over the gemm's result
    assert kwargs[("chol-L", 1, 0)]["copy"] is True  # trsm over the source block
    assert kwargs[("chol-L", 0, 0)] == {"where": (0, 0)}


def test_lu_program_has_the_kinds_placement_relies_on():
    a = from_numpy(np.eye(6), chunks=3)
    g = _record(lu_program((3, 3), np.dtype(np.float64), True), {"A": a.collection},
                [("U", (2, 2)), ("L", (2, 2)), ("order", (1,))])
    kinds = Counter(r.kind for r in g.records)
    assert kinds["lu"] == 2 + 2 + 2  # getrf, pivots and one laswp per step
    assert kinds["trsm"] == 1 and kinds["gemm"] == 1 and kinds["creation"] == 3


def _touch(x, *, copy):
    return x.copy() if copy else x


def test_in_place_only_for_the_sole_reader_of_a_grid_version():
    touch = Kernel(_touch, "elementwise", "touch", overwrites=0)
    make = Kernel(np.multiply, "elementwise", "make")
    builder = GraphBuilder()

    def program(g):
        g.call(make, ("w", 0), args=(np.ones(2), 2.0))
        g.call(touch, ("w", 0), [("w", 0)])  # made before reads were tracked: copies
        g.call(make, ("x", 0), args=(np.ones(2), 2.0))
        g.call(touch, ("x", 0), [("x", 0)])  # sole reader: in place
        g.call(make, ("y", 0), [("x", 0)], args=(Dep(0), 3.0))  # a second reader of x
        g.call(touch, ("x", 0), [("x", 0)])  # so this one copies
        g.call(touch, ("z", 0), [("x", 0)])  # the only reader, but consumes x
        g.call(touch, ("o", 0), [("z", 0)])  # z is private: in place
        g.call(touch, ("p", 0), [("o", 0)])  # o is an output: copies

    run_program("t", program, [("o", (1,)), ("p", (1,))], builder=builder)
    graph = builder.build()
    assert [graph.kwargs.get(graph.index[k], {}).get("copy") for k in
            [("t-w", 0, 2), ("t-x", 0, 1), ("t-x", 0, 2), ("t-x", 0, 3), ("t-z", 0, 1),
             ("t-o", 0), ("t-p", 0)]] == [True, None, False, True, False, False, True]

    def reads_consumed(g):
        program(g)
        g.call(make, ("q", 0), [("x", 0)], args=(Dep(0), 1.0))

    with pytest.raises(ValueError, match=r"tile \('x', 0\) is read after a task consumed it"):
        run_program("t", reads_consumed, [("o", (1,)), ("p", (1,))])

    def writes_consumed(g):
        program(g)
        g.call(make, ("x", 0), args=(np.ones(2), 1.0))  # a consumed tile may be written again

    g = run_program("t", writes_consumed, [("o", (1,)), ("p", (1,))], keep_records=True)
    assert g.records[-1].out == (("x", 0), 4) and g.version(("x", 0)) == 4


def test_repeated_reads_become_one_dependency():
    def program(g):
        g.call(Kernel(np.ones, "creation", "ones"), ("a", 0), args=(3,))
        g.call(Kernel(np.add, "elementwise", "add"), ("b", 0), [("a", 0), ("a", 0)])
        g.call(Kernel(np.subtract, "elementwise", "sub"), ("c", 0),
               [("b", 0), ("a", 0), ("b", 0)], args=(Dep(2), Dep(1)))

    (c,) = task_grid("rep", program, [("c", (1,))])
    graph = lower([c]).build()
    assert graph.dependencies(("rep-b", 0, 1)) == [("rep-a", 0, 1)]
    assert graph.dependencies(("rep-c", 0)) == [("rep-b", 0, 1), ("rep-a", 0, 1)]
    out = Array(c, (3,), ((3,),), np.float64).compute()
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])


def test_errors_name_the_tile():
    def reads_unknown(g):
        g.call(Kernel(np.negative, "elementwise", "neg"), ("x", 0), [("y", 0)])

    with pytest.raises(ValueError, match=r"tile \('y', 0\) is read before it is written"):
        _record(reads_unknown)

    def writes_nothing(g):
        pass

    def writes_twice(g):
        for _ in range(2):
            g.call(Kernel(np.zeros, "creation", "zeros"), ("x", 0), args=(1,))

    with pytest.raises(ValueError, match=r"output tile \('x', 0\) is written twice"):
        run_program("t", writes_twice, [("x", (1,))])
    (x,) = task_grid("none", writes_nothing, [("x", (2,))])
    with pytest.raises(ValueError, match=r"output tile \('x', 0\) is never written"):
        lower([x])
    with pytest.raises(ValueError, match="no outputs"):
        task_grid("none", writes_nothing, [])


def test_views_share_the_tasks_of_the_first_output():
    def program(g):
        g.call(Kernel(np.arange, "creation", "arange"), ("a", 0), args=(4,))
        g.call(Kernel(np.negative, "elementwise", "neg"), ("b", 0), [("a", 0)])

    a, b = task_grid("two", program, [("a", (1,)), ("b", (1,))])
    assert (a.ntasks, b.ntasks) == (2, 0)
    graph = lower([b]).build()
    assert len(graph) == 2
    np.testing.assert_array_equal(Array(b, (4,), ((4,),), np.int64).compute(), -np.arange(4))


def test_the_program_runs_only_when_lowered_or_counted():
    runs = []

    def program(g):
        runs.append(1)
        g.call(Kernel(np.zeros, "creation", "zeros"), ("x", 0), args=(1,))

    (x,) = task_grid("lazy", program, [("x", (1,))], ntasks=1)
    assert x.ntasks == 1 and x.key((0,)) == ("lazy-x", 0) and runs == []
    lower([x])
    assert runs == [1]
    (y,) = task_grid("lazy2", program, [("x", (1,))])
    assert y.ntasks == 1 and runs == [1, 1]


# -- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("chunks", [(4, 4, 3), (11,), (5, 6), (1,) * 11])
def test_cholesky_grid_matches_numpy(dtype, chunks):
    m = _spd(11, dtype)
    a = from_numpy(m, chunks=(chunks, chunks))
    (low,) = task_grid("c", cholesky_program(chunks, np.dtype(dtype)),
                       [("L", (len(chunks),) * 2)], sources={"A": a.collection})
    got = Array(low, m.shape, (chunks, chunks), np.dtype(dtype)).compute()
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.linalg.cholesky(m), **_tol(dtype))
    np.testing.assert_array_equal(m, _spd(11, dtype))  # the input blocks were not written


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_lu_grid_matches_scipy(dtype):
    rng = np.random.default_rng(1)
    m = rng.random((10, 10)).astype(dtype)
    chunks = (4, 4, 2)
    a = from_numpy(m, chunks=(chunks, chunks))
    u, low, order = task_grid("l", lu_program(chunks, np.dtype(dtype), True),
                              [("U", (3, 3)), ("L", (3, 3)), ("order", (1,))],
                              sources={"A": a.collection})
    u = Array(u, m.shape, (chunks, chunks), np.dtype(dtype)).compute()
    low = Array(low, m.shape, (chunks, chunks), np.dtype(dtype)).compute()
    order = Array(order, (10,), ((10,),), np.int64).compute()
    _, want_l, want_u = scipy.linalg.lu(m)
    np.testing.assert_allclose(low, want_l, **_tol(dtype))
    np.testing.assert_allclose(u, want_u, **_tol(dtype))
    np.testing.assert_allclose(m[order], low @ u, **_tol(dtype))
