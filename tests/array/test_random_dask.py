"""tilegraph.random with dask's and NumPy's signatures: every distribution of
Generator/RandomState/the module with size= and chunks=, the blocks, shapes and dtypes
dask gives, reproducible seeds, parameters that are arrays (NumPy or tilegraph, broadcast
and cut into the output's blocks), choice/permutation/multinomial, and bad input."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.random import DISTRIBUTIONS

ARGS = {"beta": (2.0, 3.0), "binomial": (10, 0.3), "chisquare": (3.0,), "f": (5.0, 7.0),
        "gamma": (2.0,), "geometric": (0.3,), "hypergeometric": (7, 5, 4),
        "logseries": (0.6,), "negative_binomial": (5, 0.5),
        "noncentral_chisquare": (3.0, 2.0), "noncentral_f": (5.0, 7.0, 1.0),
        "pareto": (3.0,), "power": (2.0,), "standard_gamma": (2.0,),
        "standard_t": (5.0,), "triangular": (0.0, 1.0, 3.0), "vonmises": (0.0, 2.0),
        "wald": (1.0, 2.0), "weibull": (1.5,), "zipf": (2.5,)}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_every_distribution_has_dasks_blocks_and_numpys_values(name, forbid_compute):
    args = ARGS.get(name, ())
    ours = getattr(tg.random.default_rng(4), name)(*args, size=(30, 40), chunks=(7, 15))
    theirs = getattr(da.random.default_rng(4), name)(*args, size=(30, 40), chunks=(7, 15))
    assert (ours.shape, ours.chunks, ours.dtype) == (theirs.shape, theirs.chunks,
                                                     theirs.dtype)
    module = getattr(tg.random, name)(*args, size=(30, 40), chunks=(7, 15))
    state = getattr(tg.random.RandomState(2), name)(*args, size=(30, 40), chunks=(7, 15))
    assert module.dtype == state.dtype == ours.dtype
    with tg.config.set(backend="sync"):
        got = ours.compute()
        again = getattr(tg.random.default_rng(4), name)(*args, size=(30, 40),
                                                        chunks=(7, 15)).compute()
    np.testing.assert_array_equal(got, again)  # the same seed, the same values
    ref = getattr(np.random.default_rng(0), name)(*args, size=20000)
    q1, q3 = np.percentile(ref, [25, 75])
    tol = max(8 * (q3 - q1) / np.sqrt(got.size), 1.0 if ref.dtype.kind in "iu" else 0.0)
    assert abs(np.median(got) - np.median(ref)) <= tol + 1e-9


def test_the_legacy_names_and_module_functions_of_dask():
    x = tg.random.randint(3, 17, size=(50, 4), chunks=(20, 3))
    assert x.chunks == da.random.randint(3, 17, size=(50, 4), chunks=(20, 3)).chunks
    v = x.compute()
    assert v.min() >= 3 and v.max() < 17 and v.dtype == np.dtype("l")
    r = tg.random.random(size=(4, 5), chunks=2)
    assert r.shape == (4, 5) and r.chunks == ((2, 2), (2, 2, 1))
    assert tg.random.random().shape == () and 0 <= float(tg.random.random().compute()) < 1
    inclusive = tg.random.random_integers(3, size=500).compute()
    assert inclusive.min() >= 1 and inclusive.max() == 3
    state = tg.random.RandomState(9)
    assert 0 <= int(state.randint(5).compute()) < 5
    assert state.random_sample((3,)).shape == (3,)
    assert state.tomaxint(size=4).compute().min() >= 0
    tg.random.seed(11)
    first = tg.random.normal(size=6, chunks=4).compute()
    tg.random.seed(11)
    np.testing.assert_array_equal(tg.random.normal(size=6, chunks=4).compute(), first)
    state.seed(1)
    a = state.uniform(size=5).compute()
    state.seed(1)
    np.testing.assert_array_equal(state.uniform(size=5).compute(), a)


@pytest.mark.parametrize("lazy", [False, True])
def test_array_parameters_broadcast_and_follow_the_blocks(lazy):
    loc = np.arange(6.0) * 100
    param = tg.from_numpy(loc, chunks=4) if lazy else loc
    g = tg.random.default_rng(3)
    x = g.normal(param, 0.01, size=(5, 6), chunks=(2, 3))
    assert x.shape == (5, 6) and x.chunks == ((2, 2, 1), (3, 3))
    v = x.compute()
    np.testing.assert_allclose(v, np.broadcast_to(loc, (5, 6)), atol=0.1)
    ints = g.integers(np.array([0, 100, 1000]), np.array([1, 101, 1001]), chunks=2)
    np.testing.assert_array_equal(ints.compute(), [0, 100, 1000])
    b = g.binomial(np.array([[1], [1000]]), [0.0, 1.0], chunks=1).compute()
    np.testing.assert_array_equal(b, [[0, 1], [0, 1000]])


def test_choice_permutation_multinomial():
    g = tg.random.default_rng(5)
    c = g.choice(4, size=(50,), chunks=20, p=[0.0, 0.0, 1.0, 0.0]).compute()
    assert set(c) == {2}
    src = tg.from_numpy(np.array([1.5, 2.5, 3.5]), chunks=2)
    assert set(g.choice(src, size=(6, 2), chunks=3).compute().ravel()) <= {1.5, 2.5, 3.5}
    no_rep = g.choice(10, size=10, replace=False, chunks=4).compute()
    np.testing.assert_array_equal(np.sort(no_rep), np.arange(10))
    p = g.permutation(tg.from_numpy(np.arange(12).reshape(6, 2), chunks=4)).compute()
    np.testing.assert_array_equal(np.sort(p[:, 0]), np.arange(0, 12, 2))
    assert (p[:, 1] - p[:, 0] == 1).all()  # whole rows move
    m = g.multinomial(20, [0.2, 0.3, 0.5], size=(7,), chunks=3)
    assert m.shape == (7, 3) and m.chunks == ((3, 3, 1), (3,))
    assert (m.compute().sum(axis=1) == 20).all()
    h = g.multivariate_hypergeometric([4, 5, 6], 7, size=(6,), chunks=4).compute()
    assert h.shape == (6, 3) and (h.sum(axis=1) == 7).all()


def test_bad_input_fails_when_the_array_is_made(forbid_compute):
    g = tg.random.default_rng(1)
    with pytest.raises(ValueError, match=r"random\.beta: a <= 0"):
        g.beta(-1.0, 2.0, size=3)
    with pytest.raises(ValueError, match="do not broadcast"):
        g.normal(np.zeros(3), 1.0, size=(2, 4))
    with pytest.raises(ValueError, match="not to the size"):
        g.normal(np.zeros((2, 3)), 1.0, size=(3,))
    with pytest.raises(TypeError, match="size must be"):
        g.poisson(1.0, size="3")
    with pytest.raises(ValueError, match="sum to 1"):
        g.choice(3, size=2, p=[0.5, 0.6, 0.1])
    with pytest.raises(ValueError, match="one dimensional"):
        g.choice(np.ones((2, 2)), size=2)
    with pytest.raises(TypeError, match="lazy tilegraph array"):
        g.multinomial(3, tg.from_numpy(np.array([0.5, 0.5])))
    with pytest.raises(TypeError, match="float32 or float64"):
        g.standard_gamma(2.0, size=3, dtype=np.int32)
    with pytest.raises(TypeError, match="non-negative int"):
        tg.random.RandomState(-3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tg.random.RandomState(1).randint(3, bogus=1)
