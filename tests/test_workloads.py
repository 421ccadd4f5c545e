"""The workload suite: every program agrees with NumPy on identical inputs, counts positive
flops, and rejects sizes it cannot run."""

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegraph import workloads
from tilegraph.workloads import WORKLOADS, check_block


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_check_agrees_with_numpy(name):
    wl = WORKLOADS[name]
    result = wl.check_details()
    assert result.size == wl.check_size
    assert result.ok, f"{name}: error {result.error:.3g} > tolerance {result.tolerance:g}"
    assert wl.check() is True


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_flops_blocks_and_sizes(name):
    wl = WORKLOADS[name]
    for size in (wl.check_size, *wl.sizes):
        assert wl.flops(size) > 0
        assert 1 <= wl.block(size) <= size
    assert list(wl.sizes) == sorted(wl.sizes)
    assert wl.check_size < min(wl.sizes)
    assert wl.flops(wl.sizes[-1]) > wl.flops(wl.sizes[0])


@pytest.mark.parametrize("bad", [0, -3, 2.5, "100", True, None])
def test_bad_sizes_are_rejected(bad):
    for wl in WORKLOADS.values():
        with pytest.raises(ValueError, match=wl.name):
            wl.flops(bad)
        with pytest.raises(ValueError, match="size"):
            wl.run_numpy(bad)


def test_flop_formulas():
    assert WORKLOADS["matmul"].flops(1000) == 2e9
    assert WORKLOADS["matmul_chain"].flops(1000) == 6e9
    assert WORKLOADS["cholesky"].flops(3000) == pytest.approx(9e9)
    assert WORKLOADS["sparse_matmul"].flops(1000) == pytest.approx(2e7)
    # qr of 10000 x 256 (c = min(256, n // 10))
    assert WORKLOADS["qr"].flops(10_000) == pytest.approx(4 * 1e4 * 256**2 - 4 * 256**3 / 3)


def test_sizes_beyond_memory_are_rejected():
    with pytest.raises(ValueError, match="GiB"):
        WORKLOADS["matmul"].validate(10**6)
    with pytest.raises(ValueError, match="GiB"):
        WORKLOADS["sparse_matmul"].flops(60_000)
    for wl in WORKLOADS.values():
        assert wl.validate(wl.sizes[-1]) == wl.sizes[-1]


def test_check_blocks_are_uneven():
    for n in (200, 300, 400, 600, 7, 2):
        block = check_block(n)
        assert 1 <= block <= n
        if n > 3:
            assert n % block != 0


def test_tilegraph_run_matches_the_program_on_numpy_inputs():
    """run_tilegraph makes its inputs lazily (tilegraph.random), so its values differ from
    NumPy's; the same program on those inputs computed eagerly gives the same result."""
    import tilegraph as tg

    wl = WORKLOADS["linear_regression"]
    (X, y, w), kwargs = wl.inputs("tilegraph", 500, 120)
    got = wl.run_tilegraph(500, block=120, backend="sync")
    Xn, yn, wn = tg.compute(X, y, w)
    ref = workloads.linear_regression(Xn, yn, wn, **kwargs)
    np.testing.assert_allclose(got, ref, rtol=1e-10)


def test_numpy_and_dask_runs():
    pytest.importorskip("dask")
    wl = WORKLOADS["pagerank"]
    for r in (wl.run_numpy(300), wl.run_dask(300)):
        assert r.shape == (300, 1)
        assert r.sum() == pytest.approx(1.0)
        assert (r > 0).all()
    u, s, vt = WORKLOADS["svd"].run_dask(300)
    assert u.shape == (300, 30) and s.shape == (30,) and vt.shape == (30, 30)


def test_dask_sparse_adapter_matches_scipy():
    da = pytest.importorskip("dask.array")
    import scipy.sparse

    rng = np.random.default_rng(5)
    S = scipy.sparse.random_array((70, 50), density=0.1, rng=rng, format="csr")
    B = rng.random((50, 4))
    x = workloads.DaskSparse(da.from_array(S, chunks=(30, 20), asarray=False))
    np.testing.assert_allclose((x @ da.from_array(B, chunks=(25, 2))).compute(), S @ B)
    np.testing.assert_allclose((x.T @ da.ones((70, 3), chunks=30)).compute(),
                               S.T @ np.ones((70, 3)))
    np.testing.assert_allclose(x.sum(axis=0).compute(), S.sum(axis=0))
    np.testing.assert_allclose(x.sum(axis=1).compute(), S.sum(axis=1))
    D = rng.random((70, 50))
    prod = (x * da.from_array(D, chunks=(30, 20))) @ da.from_array(B, chunks=(20, 4))
    np.testing.assert_allclose(prod.compute(), S.multiply(D) @ B)


def test_peak_rss_sees_numpy_allocations():
    def allocate():
        a = np.ones(40 * 2**20 // 8)  # 40 MiB, touched
        return float(a.sum())

    seconds, peak, result = workloads.measure(allocate, repeat=2)
    assert result == 40 * 2**20 // 8
    assert seconds > 0
    assert peak >= 30 * 2**20


def test_bench_rows():
    rows = workloads.bench(["matmul"], sizes=[100], against=["numpy"], backend="sync")
    assert [r.system for r in rows] == ["tilegraph", "numpy"]
    assert all(r.status == "ok" for r in rows)
    assert rows[0].ratio is None
    assert rows[1].ratio == pytest.approx(rows[1].seconds / rows[0].seconds)
    assert rows[0].gflops == pytest.approx(2e-3 / rows[0].seconds)
    with pytest.raises(KeyError, match="nope"):
        workloads.bench(["nope"])
    with pytest.raises(ValueError, match="competitor"):
        workloads.bench(["matmul"], against=["cupy"])


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_example_builds_the_registry_workload(name):
    """examples/<name>.py makes the same inputs and program as the registry."""
    build = runpy.run_path(str(EXAMPLES / f"{name}.py"))["build"]
    n = 240
    block = WORKLOADS[name].block(n)
    out = build(n, block)
    got = tg_compute(out)
    ref = WORKLOADS[name].run_tilegraph(n, block=block, backend="sync")
    for g, r in zip(got if isinstance(got, tuple) else (got,),
                    ref if isinstance(ref, tuple) else (ref,), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


def tg_compute(out):
    import tilegraph as tg

    return tg.compute(*out, backend="sync") if isinstance(out, tuple) else out.compute()


def test_example_script_runs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["matmul.py", "--n", "150", "--block", "40",
                                      "--backend", "sync"])
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(EXAMPLES / "matmul.py"), run_name="__main__")
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "matmul n=150 block=40" in out and "GFLOP/s" in out and ": ok" in out


def test_pagerank_to_a_tolerance_example_matches_the_numpy_loop(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["pagerank_tolerance.py", "--n", "600", "--block",
                                      "150", "--tol", "1e-9"])
    code = runpy.run_path(str(EXAMPLES / "pagerank_tolerance.py"))["main"]()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "check against NumPy/SciPy: ok" in out and "iterations to tolerance" in out
