"""The workload registry: every program agrees with NumPy on identical inputs, counts
positive flops, and rejects sizes it cannot run."""

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


def test_workloads_import_only_the_array_api():
    """The workloads are user programs: from tilegraph they import tilegraph.array only
    (function-level imports included), never the runtime or the plan."""
    import ast
    from pathlib import Path

    folder = Path(workloads.__file__).parent
    outside = set()
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            outside |= {(path.name, n) for n in names
                        if n.split(".")[0] == "tilegraph"
                        and n.split(".")[:2] not in (["tilegraph", "array"],
                                                     ["tilegraph", "workloads"])}
    assert outside == set()
