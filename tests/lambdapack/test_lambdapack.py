"""LambdaPACK: the language's rejections, the implicit DAG against the expanded one, node
counts against closed forms, pickled sizes, and the library against NumPy/SciPy."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.linalg

import tilegraph as tg
from tilegraph import lambdapack
from tilegraph.lambdapack import LPKernel, ProgramError
from tilegraph.lambdapack import library as lib

# -- the implicit DAG against the expanded one -----------------------------------------------


def _edges_by_lookup(dag):
    nodes = list(dag.nodes())
    children = {n: set(dag.children(n)) for n in nodes}
    parents = {n: set(dag.parents(n)) for n in nodes}
    return nodes, children, parents


BINDINGS = [
    (lib.cholesky, {"N": 1}), (lib.cholesky, {"N": 2}), (lib.cholesky, {"N": 5}),
    (lib.gemm, {"M": 2, "N": 3, "K": 4}), (lib.gemm, {"M": 1, "N": 1, "K": 1}),
    (lib.syrk, {"N": 3, "K": 2}),
    (lib.trsm, {"N": 4, "M": 2, "F": 1, "LOW": 1, "TR": 0, "UNIT": 0}),
    (lib.trsm, {"N": 4, "M": 2, "F": 0, "LOW": 0, "TR": 0, "UNIT": 1}),
    (lib.trsm_t, {"N": 3, "M": 1, "F": 0, "LOW": 1, "TR": 2, "UNIT": 0}),
    (lib.tsqr, {"N": 1, "B": 2}), (lib.tsqr, {"N": 7, "B": 2}), (lib.tsqr, {"N": 10, "B": 3}),
    (lib.qr, {"M": 3, "N": 2, "K": 2}), (lib.qr, {"M": 2, "N": 4, "K": 2}),
    (lib.qr, {"M": 3, "N": 3, "K": 3}), (lib.qr, {"M": 1, "N": 1, "K": 1}),
    (lib.svd, {"M": 3, "N": 3, "UV": 1, "RL": 4}), (lib.svd, {"M": 4, "N": 2, "UV": 1, "RL": 4}),
    (lib.svd, {"M": 1, "N": 1, "UV": 1, "RL": 4}), (lib.svd, {"M": 3, "N": 3, "UV": 0, "RL": 4}),
    (lib.tslu, {"N": 1, "B": 2, "RB": 4}), (lib.tslu, {"N": 7, "B": 2, "RB": 4}),
    (lib.tslu, {"N": 10, "B": 3, "RB": 4}),
    (lib.caqr, {"M": 4, "N": 2, "K": 2, "G": 2}), (lib.caqr, {"M": 5, "N": 3, "K": 3, "G": 1}),
    (lib.caqr, {"M": 3, "N": 3, "K": 3, "G": 4}), (lib.caqr, {"M": 2, "N": 4, "K": 2, "G": 2}),
    (lib.caqr, {"M": 7, "N": 2, "K": 2, "G": 3}),
]


@pytest.mark.parametrize("entry,params", BINDINGS, ids=lambda v: str(v))
def test_implicit_dag_equals_the_expanded_graph_edge_for_edge(entry, params):
    dag = entry.bind(**params)
    nodes, children, parents = _edges_by_lookup(dag)
    assert len(nodes) == len(set(nodes)) == dag.count()
    # children and parents are inverse of each other
    for n in nodes:
        for c in children[n]:
            assert n in parents[c]
        for p in parents[n]:
            assert n in children[p]
    # the expanded task graph has exactly these edges (input tiles are data tasks)
    graph = dag.to_taskgraph(name="x")
    expanded = {}
    for key in graph.keys:
        if key[1] in ("S", "A", "B", "L", "I") or not isinstance(key[1], int):
            continue
        node = (key[1], tuple(key[2:]))
        expanded[node] = {(d[1], tuple(d[2:])) for d in graph.dependencies(key)
                          if isinstance(d[1], int)}
    assert expanded == parents
    starters = set(dag.starters())
    assert starters == {n for n in nodes if not parents[n]}


def test_cholesky_node_counts_match_the_closed_form():
    for b in (1, 2, 3, 16, 40, 128):
        dag = lib.cholesky.bind(N=b)
        assert dag.count() == b + b * (b - 1) // 2 + b * (b * b - 1) // 6
    assert lib.cholesky.bind(N=128).count() == sum(1 for _ in lib.cholesky.bind(N=128).nodes())


def test_large_bindings_answer_without_expanding():
    dag = lib.cholesky.bind(N=4096)
    assert dag.children((0, (7,))) == [(1, (7, i)) for i in range(8, 4096)]
    assert set(dag.parents((3, (10, 100, 50)))) == {(3, (9, 100, 50)), (1, (10, 100)),
                                                    (1, (10, 50))}
    assert dag.starters() == [(0, (0,))]
    assert dag.count() == 4096 + 4096 * 4095 // 2 + 4096 * (4096**2 - 1) // 6


def test_the_pickled_dag_does_not_grow_with_its_parameters():
    small = pickle.dumps(lib.cholesky.bind(N=16))
    large = pickle.dumps(lib.cholesky.bind(N=4096))
    assert abs(len(small) - len(large)) <= 4 and len(large) <= 32 * 1024
    back = pickle.loads(large)
    assert back.children((2, (0, 5))) == lib.cholesky.bind(N=4096).children((2, (0, 5)))


def test_lookups_reject_nodes_outside_the_dag():
    dag = lib.cholesky.bind(N=4)
    for bad in [(0, (4,)), (1, (2, 2)), (9, (0,)), (0, (0, 0)), "x"]:
        with pytest.raises(ValueError, match="not a node of this DAG"):
            dag.children(bad)


def test_bind_rejects_bad_parameters():
    with pytest.raises(TypeError, match="missing N"):
        lib.cholesky.bind()
    with pytest.raises(TypeError, match="unknown M"):
        lib.cholesky.bind(N=2, M=3)
    with pytest.raises(ValueError, match="non-negative integer"):
        lib.cholesky.bind(N=-1)
    with pytest.raises(ValueError, match="at least 2"):
        lib.tsqr.bind(N=4, B=1)


# -- a user's own program -----------------------------------------------------------------------


def _scale(x, factor):
    return x * factor


SCALE = LPKernel("scale", _scale, "map")


@lambdapack.program(kernels={"scale": SCALE, "add": LPKernel("add", np.add, "elementwise")})
def prefix_sums(X, P, N: int):
    P[0] = scale(X[0], 1)  # noqa: F821
    for i in range(1, N):
        m = i - 1
        if i >= 1:
            P[i] = add(P[m], X[i])  # noqa: F821


def test_a_user_program_runs_through_the_pipeline():
    dag = prefix_sums.bind(N=6)
    assert dag.count() == 6 and dag.starters() == [(0, ())]
    blocks = [np.full((2, 2), float(i)) for i in range(6)]
    graph = dag.to_taskgraph(inputs={"X": lambda t: blocks[t[0]]}, name="ps")
    out = tg.run(graph, [("ps", 1, 5)])
    np.testing.assert_array_equal(out[0], np.full((2, 2), 15.0))
    assert dag.critical_path() == 6
    assert "tasks in all" in dag.explain()
    assert "->" in dag.to_dot()


# -- rejected at definition time, with the line and the reason ---------------------------------


def _define(source: str, tmp_path, name="prog"):
    path = tmp_path / f"{name}.py"
    path.write_text("from tilegraph import lambdapack\n\n" + source)
    namespace: dict = {}
    code = compile(path.read_text(), str(path), "exec")
    import linecache

    linecache.cache[str(path)] = (len(source), None, path.read_text().splitlines(True),
                                  str(path))
    exec(code, namespace)  # the decorator runs here
    return namespace


REJECTED = {
    "non-affine index": ("for i in range(N):\n        for j in range(N):\n"
                         "            C[i * j, 0] = matmul(A[i, 0], A[j, 0])", "product of two"),
    "while loop": ("i = 0\n    while i < N:\n        C[i, 0] = matmul(A[i, 0], A[i, 0])",
                   "'while' loops are not allowed"),
    "data-dependent if": ("for i in range(N):\n        if A[i, 0] > 0:\n"
                          "            C[i, 0] = matmul(A[i, 0], A[i, 0])", "data-dependent"),
    "tile written twice": ("for i in range(N):\n        for j in range(N):\n"
                           "            C[i, 0] = matmul(A[i, 0], A[j, 0])",
                           "writes one tile more than once"),
    "two statements, one tile": ("for i in range(N):\n        C[i, 0] = matmul(A[i, 0], "
                                 "A[i, 0])\n    for i in range(N):\n        C[i, 0] = "
                                 "matmul(A[i, 0], A[i, 0])", "written twice"),
    "unknown kernel": ("for i in range(N):\n        C[i, 0] = frobnicate(A[i, 0])",
                       "unknown kernel 'frobnicate'"),
    "non-range loop": ("for i in [1, 2]:\n        C[i, 0] = matmul(A[i, 0], A[i, 0])",
                       "loops must be over range"),
    "division in an index": ("for i in range(N):\n        C[i // 2, 0] = matmul(A[i, 0], "
                             "A[i, 0])", "non-affine expression"),
    "non-affine scalar in an index": ("for i in range(N):\n        m = 2 ** i\n"
                                      "        C[m, 0] = matmul(A[i, 0], A[i, 0])",
                                      "non-affine index"),
    "or in a condition": ("for i in range(N):\n        if i < 2 or i > 3:\n"
                          "            C[i, 0] = matmul(A[i, 0], A[i, 0])", "joined by 'and'"),
    "reserved loop variable": ("for t0 in range(N):\n        C[t0, 0] = matmul(A[t0, 0], "
                               "A[t0, 0])", "is reserved"),
    "call outside a tile write": ("for i in range(N):\n        matmul(A[i, 0], A[i, 0])",
                                  "is not allowed"),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_constructs_the_analysis_cannot_handle_are_rejected_when_defined(case, tmp_path):
    body, reason = REJECTED[case]
    source = ("@lambdapack.program\ndef prog(A, C, N: int):\n    " + body + "\n")
    with pytest.raises(ProgramError, match=reason) as info:
        _define(source, tmp_path, name=case.replace(" ", "_").replace(",", ""))
    assert "line " in str(info.value)


# -- the library against NumPy / SciPy --------------------------------------------------------

DTYPES = [np.float32, np.float64, np.complex128]


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if np.dtype(dtype) == np.float32 else dict(
        rtol=1e-8, atol=1e-8)


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,chunks", [(9, 3), (10, 4), (23, 7), (5, 5)])
def test_library_cholesky_trsm_and_gemm_match_numpy(n, chunks, dtype):
    rng = np.random.default_rng(n)
    a = _rand(rng, (n, n), dtype)
    spd = (a @ a.conj().T + n * np.eye(n)).astype(dtype)
    x = tg.from_numpy(spd, chunks=chunks)
    low = lib.cholesky(x)
    np.testing.assert_allclose(low.compute(), np.linalg.cholesky(spd), **_tol(dtype))
    b = _rand(rng, (n, 3), dtype)
    sol = lib.trsm(low, tg.from_numpy(b, chunks=(chunks, 2)))
    ref = scipy.linalg.solve_triangular(np.linalg.cholesky(spd), b, lower=True)
    np.testing.assert_allclose(sol.compute(), ref, **_tol(dtype))
    m = _rand(rng, (n, n + 2), dtype)
    prod = lib.gemm(x, tg.from_numpy(m, chunks=chunks))
    np.testing.assert_allclose(prod.compute(), spd @ m, **_tol(dtype))
    low_gram = lib.syrk(tg.from_numpy(m, chunks=chunks))
    np.testing.assert_allclose(low_gram.compute(), np.tril(m @ m.conj().T), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,branch", [((6,), 2), ((5, 5, 7), 2), ((4,) * 9, 3)])
def test_library_tsqr_gives_the_r_factor(rows, branch, dtype):
    rng = np.random.default_rng(len(rows))
    a = _rand(rng, (sum(rows), 4), dtype)
    r = lib.tsqr(tg.from_numpy(a, chunks=(rows, 4)), branch=branch).compute()
    assert r.shape == (4, 4)
    np.testing.assert_allclose(np.triu(r), r, **_tol(dtype))
    np.testing.assert_allclose(r.conj().T @ r, a.conj().T @ a, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,block", [((13, 7), 4), ((7, 13), 4), ((20, 20), 5),
                                         ((9, 5), 9), ((30, 11), 4), ((5, 5), 2)])
def test_library_qr_is_householder_qr_of_any_shape(shape, block, dtype):
    rng = np.random.default_rng(shape[0])
    a = _rand(rng, shape, dtype)
    q, r = lib.qr(tg.from_numpy(a, chunks=block))
    qv, rv = tg.compute(q, r)
    k = min(shape)
    assert qv.shape == (shape[0], k) and rv.shape == (k, shape[1])
    np.testing.assert_allclose(qv @ rv, a, **_tol(dtype))
    np.testing.assert_allclose(qv.conj().T @ qv, np.eye(k), **_tol(dtype))
    np.testing.assert_allclose(np.triu(rv), rv, **_tol(dtype))
    # numpy's factors with R's diagonal made non-negative
    rn = np.linalg.qr(a, mode="r")
    signs = np.diagonal(rn) / np.where(np.diagonal(rn) == 0, 1, np.abs(np.diagonal(rn)))
    np.testing.assert_allclose(rv, signs.conj()[:, None] * rn, **_tol(dtype))
    # tg.linalg.qr of a matrix of several column blocks is this program
    r2 = tg.linalg.qr(tg.from_numpy(a, chunks=block), mode="r")
    if shape[1] > block:
        names = {n for n in tg.algebra.lower([r2.collection]).build().meta["name"] if n}
        assert "hh_geqrt" in names


def test_library_qr_rejects_bad_input():
    with pytest.raises(ValueError, match="block must be a positive integer"):
        lib.qr(tg.ones((4, 4), chunks=2), block=0)
    with pytest.raises(ValueError, match="2-D"):
        lib.qr(tg.ones(4, chunks=2))
    with pytest.raises(ValueError, match="empty"):
        lib.qr(tg.ones((0, 3), chunks=2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,block", [((13, 7), 4), ((7, 13), 4), ((20, 20), 5),
                                         ((11, 10), 4), ((30, 11), 4), ((9, 9), 9),
                                         ((17, 17), 3), ((8, 8), 4)])
def test_library_svd_is_the_band_reduction_and_the_band_s_svd(shape, block, dtype):
    rng = np.random.default_rng(shape[0] * shape[1])
    a = _rand(rng, shape, dtype)
    u, s, vh = tg.compute(*lib.svd(tg.from_numpy(a, chunks=block)))
    k = min(shape)
    assert u.shape == (shape[0], k) and s.shape == (k,) and vh.shape == (k, shape[1])
    assert u.dtype == a.dtype and vh.dtype == a.dtype and s.dtype == np.abs(a).dtype
    want = np.linalg.svd(a, compute_uv=False)
    if dtype == np.float32:
        np.testing.assert_allclose(s, want, rtol=1e-4, atol=1e-5 * want[0])
    else:
        np.testing.assert_allclose(s, want, rtol=1e-10)
    np.testing.assert_allclose((u * s) @ vh, a, **_tol(dtype))
    np.testing.assert_allclose(u.conj().T @ u, np.eye(k), **_tol(dtype))
    np.testing.assert_allclose(vh @ vh.conj().T, np.eye(k), **_tol(dtype))
    only = lib.svd(tg.from_numpy(a, chunks=block), compute_uv=False).compute()
    np.testing.assert_allclose(only, s, **_tol(dtype))


def test_library_svd_reduces_to_a_band_one_tile_wide():
    # the band rows the program gathers: R upper triangular, L lower triangular, and the
    # band they make has the matrix's singular values
    rng = np.random.default_rng(4)
    b, M, N = 4, 4, 3
    a = rng.standard_normal((M * b - 1, N * b - 2))
    rows = (b, b, b, b - 1)
    cols = (b, b, b - 2)
    ro, co = np.cumsum((0, *rows)), np.cumsum((0, *cols))
    dag = lib.svd.bind(M=M, N=N, UV=0, RL=rows[N - 1])
    graph = dag.to_taskgraph(inputs={"A": lambda t: a[ro[t[0]]:ro[t[0] + 1],
                                                      co[t[1]]:co[t[1] + 1]]}, name="b")
    rows_out = tg.run(graph, [dag.node_key("b", dag.writer("BR", (k,))) for k in range(N)])
    band = np.zeros((a.shape[1], a.shape[1]))
    for k in range(N):
        row = rows_out[k]
        r = row[0]
        np.testing.assert_allclose(np.triu(r), r)
        band[co[k]:co[k + 1], co[k]:co[k + 1]] = r
        if k < N - 1:
            low = row[1]
            np.testing.assert_allclose(np.tril(low), low)
            band[co[k]:co[k] + low.shape[0], co[k + 1]:co[k + 1] + low.shape[1]] = low
    np.testing.assert_allclose(np.linalg.svd(band, compute_uv=False),
                               np.linalg.svd(a, compute_uv=False), rtol=1e-10)


def test_library_svd_counts_and_rejects_bad_input():
    from collections import Counter

    dag = lib.svd.bind(M=5, N=3, UV=1, RL=4)
    per_kernel = Counter(dag.statements[n[0]].kernel for n in dag.nodes())
    assert per_kernel["band_svd"] == 1 and per_kernel["hh_geqrt"] == 3
    assert per_kernel["lq_geqrt"] == 2 and per_kernel["lq_tsqrt"] == 1
    # tsmqr: QR trailing updates (4*2 + 3*1) and U's pairs (3 columns x (2 + 3 + 4))
    assert per_kernel["hh_tsmqr"] + per_kernel["hh_tsmqr_zero"] == 11 + 3 * 9 + 3 * 1
    no_vectors = Counter(dag.statements[n[0]].kernel
                         for n in lib.svd.bind(M=5, N=3, UV=0, RL=4).nodes())
    assert "svd_u" not in no_vectors and no_vectors["band_svd"] == 1
    with pytest.raises(ValueError, match="block must be a positive integer"):
        lib.svd(tg.ones((4, 4), chunks=2), block=0)
    with pytest.raises(ValueError, match="2-D"):
        lib.svd(tg.ones(4, chunks=2))
    with pytest.raises(ValueError, match="empty"):
        lib.svd(tg.ones((0, 3), chunks=2))
    with pytest.raises(TypeError, match="numeric"):
        lib.svd(tg.from_numpy(np.array([["a", "b"]])))


def _check_tslu(a, perm, low, up, dtype):
    m, n = a.shape
    assert perm.shape == (n,) and low.shape == (m, n) and up.shape == (n, n)
    assert sorted(set(perm.tolist())) == sorted(perm.tolist()) and perm.min() >= 0
    assert perm.max() < m
    np.testing.assert_allclose(low @ up, a, **_tol(dtype))
    np.testing.assert_allclose(np.triu(up), up)
    top = low[perm]
    np.testing.assert_allclose(top, np.tril(top, -1) + np.eye(n), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,rows,branch", [((40, 5), 10, 2), ((43, 6), 8, 3),
                                               ((50, 4), (5, 5, 7, 20, 13), 2),
                                               ((64, 8), 8, 4), ((6, 6), 6, 2)])
def test_library_tslu_is_lu_with_tournament_pivoting(shape, rows, branch, dtype):
    rng = np.random.default_rng(shape[0])
    a = _rand(rng, shape, dtype)
    perm, low, up = tg.compute(*lib.tslu(tg.from_numpy(a, chunks=(rows, shape[1])),
                                         branch=branch))
    _check_tslu(a, perm, low, up, dtype)
    if isinstance(rows, int) and rows >= shape[0]:  # one tile: the tournament is GEPP
        p, l_sp, u_sp = scipy.linalg.lu(a)
        np.testing.assert_allclose(up, u_sp, **_tol(dtype))
        np.testing.assert_allclose(low, p @ l_sp, **_tol(dtype))


def test_library_tslu_picks_scipy_s_pivots_when_they_are_clear():
    # column j's largest entry (by far) sits in row r[j], in a different tile each
    rng = np.random.default_rng(8)
    m, n, rb = 48, 4, 6
    a = rng.random((m, n))
    r = [41, 3, 26, 17]
    for j, row in enumerate(r):
        a[row, j] = 100.0 * (j + 1)
    perm, low, up = tg.compute(*lib.tslu(tg.from_numpy(a, chunks=(rb, n)), branch=2))
    assert perm.tolist() == r
    p, l_sp, u_sp = scipy.linalg.lu(a)
    np.testing.assert_allclose(up, u_sp, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(low, p @ l_sp, rtol=1e-12, atol=1e-12)
    _check_tslu(a, perm, low, up, np.float64)


def test_library_tslu_rejects_bad_input():
    with pytest.raises(ValueError, match="tall-skinny"):
        lib.tslu(tg.ones((3, 5), chunks=3))
    with pytest.raises(ValueError, match="2-D"):
        lib.tslu(tg.ones(4, chunks=2))
    with pytest.raises(ValueError, match="tslu: branch must be an integer >= 2"):
        lib.tslu(tg.ones((8, 2), chunks=(4, 2)), branch=1)
    singular = np.ones((12, 3))
    with pytest.raises(np.linalg.LinAlgError, match="tslu: the matrix is singular"):
        tg.compute(*lib.tslu(tg.from_numpy(singular, chunks=(4, 3))))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,block,group", [((16, 8), 4, 2), ((13, 7), 4, 1),
                                               ((30, 11), 4, 3), ((7, 13), 4, 2),
                                               ((20, 20), 5, 2), ((9, 5), 9, 2),
                                               ((29, 10), 3, 4), ((29, 10), 3, 100)])
def test_library_caqr_gives_numpy_s_q_and_r(shape, block, group, dtype):
    rng = np.random.default_rng(shape[0] + group)
    a = _rand(rng, shape, dtype)
    q, r = tg.compute(*lib.caqr(tg.from_numpy(a, chunks=block), group=group))
    k = min(shape)
    assert q.shape == (shape[0], k) and r.shape == (k, shape[1])
    assert q.dtype == a.dtype and r.dtype == a.dtype
    qn, rn = np.linalg.qr(a)
    signs = np.diagonal(rn) / np.where(np.diagonal(rn) == 0, 1, np.abs(np.diagonal(rn)))
    np.testing.assert_allclose(r, signs.conj()[:, None] * rn, **_tol(dtype))
    np.testing.assert_allclose(q, qn * signs[None, :], **_tol(dtype))
    assert (np.diagonal(r).real >= 0).all() and not np.diagonal(r).imag.any()
    np.testing.assert_allclose(q @ r, a, **_tol(dtype))
    np.testing.assert_allclose(q.conj().T @ q, np.eye(k), **_tol(dtype))


def test_library_caqr_is_a_tree_per_panel():
    from collections import Counter

    # one tile column of 16 tiles: groups of 4 factor at once, then 3 merges; the flat
    # tree of library.qr is a chain of 16
    tree = lib.caqr.bind(M=16, N=1, K=1, G=4)
    flat = lib.qr.bind(M=16, N=1, K=1)
    assert tree.critical_path() < flat.critical_path()
    kernels = Counter(tree.statements[n[0]].kernel for n in tree.nodes())
    assert kernels["hh_geqrt"] == 4 and kernels["hh_tsqrt"] == 12
    assert kernels["hh_ttqrt"] == 3
    # groups of one tile: TSQR's leaves, every tile of every panel factored on its own
    one = lib.caqr.bind(M=5, N=3, K=3, G=1)
    leaves = Counter(one.statements[n[0]].kernel for n in one.nodes())
    assert leaves["hh_geqrt"] == 5 + 4 + 3 and leaves["hh_tsqrt"] == 0


def test_library_caqr_rejects_bad_input():
    with pytest.raises(ValueError, match="caqr: group must be a positive integer"):
        lib.caqr(tg.ones((4, 4), chunks=2), group=0)
    with pytest.raises(ValueError, match="caqr: block must be a positive integer"):
        lib.caqr(tg.ones((4, 4), chunks=2), block=-1)
    with pytest.raises(ValueError, match="2-D"):
        lib.caqr(tg.ones(4, chunks=2))
    with pytest.raises(ValueError, match="empty"):
        lib.caqr(tg.ones((0, 3), chunks=2))
    with pytest.raises(TypeError, match="numeric"):
        lib.caqr(tg.from_numpy(np.array([["a", "b"]])))


def test_tg_linalg_cholesky_is_the_library_program():
    x = tg.ones((20, 20), chunks=5) + 20 * tg.eye(20, chunks=5)
    names = {name for name in tg.algebra.lower([tg.linalg.cholesky(x).collection]).build()
             .meta["name"] if name}
    assert {"potrf", "trsm_right", "syrk_update", "gemm_update"} <= names


def test_the_library_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        lib.cholesky(tg.ones((4, 3), chunks=2))
    with pytest.raises(ValueError, match="not aligned"):
        lib.gemm(tg.ones((4, 3), chunks=2), tg.ones((4, 3), chunks=2))
    with pytest.raises(ValueError, match="at least 4 rows"):
        lib.tsqr(tg.ones((6, 4), chunks=(3, 4)))
    with pytest.raises(ValueError, match="branch"):
        lib.tsqr(tg.ones((8, 4), chunks=(4, 4)), branch=1)
    with pytest.raises(TypeError, match="numeric"):
        lib.cholesky(tg.from_numpy(np.array([["a"]], dtype=object).astype(str), chunks=1))


def test_in_place_kernels_never_write_over_a_tile_another_task_reads():
    graph = lib.cholesky.bind(N=4).to_taskgraph(name="c")
    for i, key in enumerate(graph.keys):
        kw = graph.kwargs.get(i) or {}
        if kw.get("copy") is False:
            (written,) = [d for d in graph.dependencies(key)
                          if graph.meta["name"][graph.index[d]] in ("syrk_update",
                                                                   "gemm_update")][:1]
            readers = [k for k in graph.keys if written in graph.dependencies(k)]
            assert readers == [key]


def test_explain_and_a_drawing_of_a_small_dag(tmp_path):
    import shutil

    dag = lib.cholesky.bind(N=4)
    text = dag.explain(shape_of=lambda array, tile: (10, 10))
    assert "20 tasks in all" in text and "critical path: 10 tasks" in text and "flops" in text
    dot = dag.to_dot()
    assert dot.count("->") == sum(len(dag.children(n)) for n in dag.nodes())
    with pytest.raises(ValueError, match="more than 5 nodes"):
        dag.to_dot(max_nodes=5)
    with pytest.raises(ValueError, match="must end in"):
        dag.draw(str(tmp_path / "x.txt"))
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (make test installs it on Debian)")
    path = dag.draw(str(tmp_path / "cholesky.svg"))
    assert "<svg" in open(path).read()


@lambdapack.program(kernels={"plus": LPKernel("plus", np.add, "elementwise"),
                             "axpy": LPKernel("axpy", lambda y, a, x: y + a * x, "map")})
def doubled(X, Y, Z, N: int):
    for i in range(N):
        Y[i] = plus(X[i], X[i])  # noqa: F821
        Z[i] = axpy(Y[i], i, X[i])  # noqa: F821  (an integer argument between tiles)


def test_a_tile_read_twice_and_integer_arguments():
    dag = doubled.bind(N=3)
    blocks = [np.arange(4.0) + i for i in range(3)]
    graph = dag.to_taskgraph(inputs={"X": lambda t: blocks[t[0]]}, name="d")
    out = tg.run(graph, [("d", 0, 2), ("d", 1, 2)])
    np.testing.assert_array_equal(out[0], 2 * blocks[2])
    np.testing.assert_array_equal(out[1], 2 * blocks[2] + 2 * blocks[2])
    assert dag.parents((1, (2,))) == [(0, (2,))]


def _r_of(*blocks):
    return np.linalg.qr(np.concatenate(blocks, axis=0), mode="r")


QR_R = LPKernel("qr_r_pair", _r_of, "qr")


@lambdapack.program(kernels={"qr_r_pair": QR_R})
def binary_tsqr(A, T, R, N: int, L: int):
    for i in range(N):
        T[0, i] = qr_r_pair(A[i, 0])  # noqa: F821
    for level in range(1, L + 1):
        for m in range(ceil_div(N, 2 ** level)):  # noqa: F821
            if 2 * m + 1 < ceil_div(N, 2 ** (level - 1)):  # noqa: F821
                T[level, m] = qr_r_pair(T[level - 1, 2 * m], T[level - 1, 2 * m + 1])  # noqa: F821
            else:
                T[level, m] = qr_r_pair(T[level - 1, 2 * m])  # noqa: F821
    R[0, 0] = qr_r_pair(T[L, 0])  # noqa: F821


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11])
def test_non_affine_bounds_and_conditions_a_binary_tree(n):
    levels = max(0, (n - 1).bit_length())
    dag = binary_tsqr.bind(N=n, L=levels)
    nodes, children, parents = _edges_by_lookup(dag)
    for node in nodes:
        for c in children[node]:
            assert node in parents[c]
    assert set(dag.starters()) == {nd for nd in nodes if not parents[nd]}
    assert len(dag.starters()) == n
    rng = np.random.default_rng(n)
    blocks = [rng.standard_normal((6, 3)) for _ in range(n)]
    graph = dag.to_taskgraph(inputs={"A": lambda t: blocks[t[0]]}, name="bt")
    (r,) = tg.run(graph, [("bt", 3, )])
    a = np.concatenate(blocks)
    np.testing.assert_allclose(r.T @ r, a.T @ a, rtol=1e-10, atol=1e-10)


# the paper's Figure 5 (numpywren), as it is written there: a step and a read index that
# are powers of a loop variable
@lambdapack.program
def paper_tsqr(A, R, N: int):
    for i in range(0, N):
        R[i, 0] = qr_r(A[i])  # noqa: F821
    for level in range(0, log2(N)):  # noqa: F821
        for i in range(0, N, 2 ** (level + 1)):
            R[i, level + 1] = qr_r(R[i, level], R[i + 2 ** level, level])  # noqa: F821


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_the_paper_s_tsqr_as_written_equals_its_expanded_dag_and_numpy(n):
    dag = paper_tsqr.bind(N=n)
    nodes, children, parents = _edges_by_lookup(dag)
    assert len(nodes) == dag.count() == 2 * n - 1
    for node in nodes:
        for c in children[node]:
            assert node in parents[c]
        for p in parents[node]:
            assert node in children[p]
    assert set(dag.starters()) == {nd for nd in nodes if not parents[nd]}
    graph = dag.to_taskgraph(name="pq")
    expanded = {(k[1], tuple(k[2:])): {(d[1], tuple(d[2:])) for d in graph.dependencies(k)
                                       if isinstance(d[1], int)}
                for k in graph.keys if isinstance(k[1], int)}
    assert expanded == parents   # edge for edge
    rng = np.random.default_rng(n)
    blocks = [rng.standard_normal((5, 3)) for _ in range(n)]
    graph = dag.to_taskgraph(inputs={"A": lambda t: blocks[t[0]]}, name="pq")
    top = max(nodes, key=lambda nd: (nd[0], nd[1][0], -nd[1][-1]))   # the last level
    (r,) = tg.run(graph, [("pq", *top[:1], *top[1])])
    a = np.concatenate(blocks)
    np.testing.assert_allclose(r.T @ r, a.T @ a, rtol=1e-10, atol=1e-10)


def test_a_written_tile_still_needs_an_affine_index(tmp_path):
    source = ("@lambdapack.program\ndef prog(A, C, N: int):\n    for i in range(N):\n"
              "        C[2 ** i, 0] = matmul(A[i, 0], A[i, 0])\n")
    with pytest.raises(ProgramError, match="non-affine"):
        _define(source, tmp_path, name="written_pow")
