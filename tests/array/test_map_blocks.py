"""``map_blocks`` with dask's semantics: ``block_id`` and ``block_info`` for functions
that name them (with dask's structure, on uneven blocks, with constants between the
arrays, broadcasting, ``drop_axis``, ``new_axis`` and no array at all), ``chunks=`` in
dask's forms, ``dtype=``/``meta=``, and the errors of bad input. The cases follow dask's
own tests of ``map_blocks`` (dask/array/tests/test_array_core.py), written again here."""

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.chunks import offsets

pytestmark = pytest.mark.filterwarnings("error")


def locations(chunks, coord):
    return [(offsets(c)[k], offsets(c)[k + 1]) for c, k in zip(chunks, coord, strict=True)]


def test_block_id_is_the_output_blocks_coordinates():
    a = np.arange(10, dtype="i8")
    x = tg.from_numpy(a, chunks=((3, 1, 4, 2),))

    def func(block, block_id=None, c=0):
        return np.ones_like(block) * sum(block_id) + c

    out = x.map_blocks(func, dtype="i8")
    np.testing.assert_array_equal(out.compute(), [0, 0, 0, 1, 2, 2, 2, 2, 3, 3])
    plus = x.map_blocks(func, dtype="i8", c=1)
    np.testing.assert_array_equal(plus.compute(), out.compute() + 1)
    assert x.map_blocks(func, dtype="i8").name == out.name  # the same plan, the same name
    assert plus.name != out.name


def test_block_id_in_two_dimensions_with_uneven_blocks():
    x = tg.ones((5, 7), chunks=((2, 3), (4, 1, 2)), dtype=int)

    def func(block, *, block_id):
        return np.full(block.shape, 10 * block_id[0] + block_id[1])

    got = x.map_blocks(func, dtype=int).compute()
    want = np.empty((5, 7), int)
    for i, j in itertools.product(range(2), range(3)):
        rows = slice(*locations(x.chunks, (i, j))[0])
        cols = slice(*locations(x.chunks, (i, j))[1])
        want[rows, cols] = 10 * i + j
    np.testing.assert_array_equal(got, want)


def test_block_info_of_inputs_in_argument_positions_and_of_the_output():
    chunks = ((10, 5, 20, 15),)
    x = tg.arange(50, chunks=chunks)
    seen = []

    def func(a, b, c, block_info=None):
        seen.append(block_info)
        assert set(block_info) == {0, 2, None}  # the constant (position 1) has none
        for idx in (0, 2, None):
            info = block_info[idx]
            assert info["shape"] == (50,)
            assert info["num-chunks"] == (4,)
            (start, stop), = info["array-location"]
            k, = info["chunk-location"]
            assert (start, stop) == locations(chunks, (k,))[0]
        assert block_info[None]["chunk-shape"] == (chunks[0][k],)
        assert block_info[None]["dtype"] == x.dtype
        return a + b + c

    z = tg.map_blocks(func, x, 100, x + 1, dtype=x.dtype)
    np.testing.assert_array_equal(z.compute(backend="sync"), np.arange(50) * 2 + 101)
    assert sorted(i[None]["chunk-location"] for i in seen) == [(0,), (1,), (2,), (3,)]


def test_block_info_with_new_axis():
    values = tg.from_numpy(np.array(["a", "a", "b", "c", "d"]), chunks=((2, 3),))

    def func(x, block_info=None):
        assert block_info.keys() == {0, None}
        assert block_info[0]["shape"] == (5,)
        assert block_info[0]["num-chunks"] == (2,)
        assert block_info[None]["shape"] == (5, 3)
        assert block_info[None]["num-chunks"] == (2, 1)
        assert block_info[None]["dtype"] == np.dtype("f8")
        k, = block_info[0]["chunk-location"]
        assert block_info[None]["chunk-location"] == (k, 0)
        assert block_info[0]["array-location"] == [[(0, 2)], [(2, 5)]][k]
        assert block_info[None]["array-location"] == [[(0, 2), (0, 3)], [(2, 5), (0, 3)]][k]
        assert block_info[None]["chunk-shape"] == ((2, 3), (3, 3))[k]
        return np.ones((len(x), 3))

    z = values.map_blocks(func, chunks=((2, 3), 3), new_axis=1, dtype="f8")
    assert z.chunks == ((2, 3), (3,))
    np.testing.assert_array_equal(z.compute(), np.ones((5, 3)))


def test_block_info_with_drop_axis():
    a = np.array([[1, 2, 4], [8, 16, 32], [64, 128, 256], [1024, 2048, 4096],
                  [3, 5, 7]], dtype="u4")
    values = tg.from_numpy(a, chunks=((2, 3), (1, 2)))

    def func(x, block_info=None):
        assert block_info.keys() == {0, None}
        assert block_info[0]["shape"] == (5, 3)
        assert block_info[0]["num-chunks"] == (2, 1)  # the dropped axis is one block
        assert block_info[None]["shape"] == (5,)
        assert block_info[None]["num-chunks"] == (2,)
        assert block_info[None]["dtype"] == np.dtype("u4")
        k = block_info[0]["chunk-location"][0]
        assert block_info[0]["chunk-location"] == (k, 0)
        assert block_info[0]["array-location"] == [[(0, 2), (0, 3)], [(2, 5), (0, 3)]][k]
        assert block_info[None]["chunk-location"] == (k,)
        assert block_info[None]["array-location"] == [[(0, 2)], [(2, 5)]][k]
        assert block_info[None]["chunk-shape"] == ((2,), (3,))[k]
        return np.sum(x, axis=1, dtype="u4")

    z = values.map_blocks(func, drop_axis=1, dtype="u4")
    assert z.chunks == ((2, 3),)
    np.testing.assert_array_equal(z.compute(), a.sum(axis=1, dtype="u4"))


def test_block_info_with_broadcast_blocks():
    a = tg.ones((3, 4), chunks=(3, 2))
    b = tg.ones((6, 2), chunks=(3, 2))
    c = tg.ones((4,), chunks=(2,))
    info = {}

    def func(x, y, z, block_info=None):
        info[block_info[None]["chunk-location"]] = block_info
        return x + y + z

    d = tg.map_blocks(func, a, b, c, chunks=((3, 3), (2, 2)), dtype=a.dtype)
    assert d.chunks == ((3, 3), (2, 2))
    np.testing.assert_array_equal(d.compute(backend="sync"), 3 * np.ones((6, 4)))
    assert sorted(info) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for (i, j), got in info.items():
        assert got[0] == {"shape": (3, 4), "num-chunks": (1, 2), "chunk-location": (0, j),
                          "array-location": [(0, 3), (2 * j, 2 * j + 2)]}
        assert got[1] == {"shape": (6, 2), "num-chunks": (2, 1), "chunk-location": (i, 0),
                          "array-location": [(3 * i, 3 * i + 3), (0, 2)]}
        assert got[2] == {"shape": (4,), "num-chunks": (2,), "chunk-location": (j,),
                          "array-location": [(2 * j, 2 * j + 2)]}
        assert got[None] == {"shape": (6, 4), "num-chunks": (2, 2), "dtype": np.float64,
                             "chunk-shape": (3, 2), "chunk-location": (i, j),
                             "array-location": [(3 * i, 3 * i + 3), (2 * j, 2 * j + 2)]}


def test_no_array_arguments_make_an_array_from_block_info():
    def func(dtype, block_info=None):
        (start, stop), = block_info[None]["array-location"]
        return np.arange(start, stop, dtype=dtype)

    x = tg.map_blocks(func, np.float32, chunks=((5, 3),), dtype=np.float32)
    assert x.chunks == ((5, 3),)
    np.testing.assert_array_equal(x.compute(), np.arange(8, dtype=np.float32))

    def ramp(block_info=None):
        (start, stop), = block_info[None]["array-location"]
        return np.arange(start, stop, dtype=block_info[None]["dtype"])

    y = tg.map_blocks(ramp, chunks=((2, 2, 1, 3),), dtype=np.float32)
    z = tg.map_blocks(ramp, chunks=((5, 3),), dtype=np.float64)
    np.testing.assert_array_equal(y.compute(), np.arange(8, dtype=np.float32))
    assert z.compute().dtype == np.float64
    assert len({x.name, y.name, z.name}) == 3


def test_block_info_with_drop_axis_and_new_axis_give_distinct_plans():
    def func(some, block_info=None):
        if not block_info:
            return some
        return np.zeros(block_info[None]["chunk-shape"], dtype=block_info[None]["dtype"])

    three = tg.zeros((3, 4, 5), chunks=((3,), (4,), (5,)), dtype=np.float32)
    x = tg.map_blocks(func, three, drop_axis=[0], dtype=np.float32)
    y = tg.map_blocks(func, three, drop_axis=[2], dtype=np.float32)
    assert (x.chunks, y.chunks) == (((4,), (5,)), ((3,), (4,)))
    assert x.name != y.name
    np.testing.assert_array_equal(x.compute(), np.zeros((4, 5), np.float32))
    two = tg.zeros((3, 4), chunks=((1, 2), (4,)), dtype=np.float32)
    p = tg.map_blocks(func, two, new_axis=[0], dtype=np.float32)
    q = tg.map_blocks(func, two, new_axis=[2], dtype=np.float32)
    assert (p.chunks, q.chunks) == (((1,), (1, 2), (4,)), ((1, 2), (4,), (1,)))
    assert p.name != q.name
    np.testing.assert_array_equal(q.compute(), np.zeros((3, 4, 1), np.float32))


def test_new_axis_inferred_from_chunks_on_the_left():
    x = tg.ones((5, 3), chunks=(2, 2))
    y = tg.map_blocks(lambda b: b[None], x, chunks=((1,), (2, 2, 1), (2, 1)))
    np.testing.assert_array_equal(y.compute(), np.ones((1, 5, 3)))


def test_blocks_pair_by_position_and_one_block_broadcasts():
    dx = tg.from_numpy(np.array([[1, 2, 3, 4]]), chunks=((1,), (2, 2)))
    dy = tg.from_numpy(np.array([[10, 20], [30, 40]]), chunks=((1, 1), (2,)))
    result = tg.map_blocks(lambda x, y: x + y, dx, dy)
    assert result.chunks == ((1, 1), (2, 2))
    np.testing.assert_array_equal(result.compute(), [[11, 22, 13, 24], [31, 42, 33, 44]])
    x = tg.from_numpy(np.arange(1000), chunks=100)
    y = tg.from_numpy(np.arange(100), chunks=10)

    def func(a, b):
        return np.array([a.max(), b.max()])

    got = tg.map_blocks(func, x, y, chunks=(2,), dtype="i8").compute()
    want = np.stack([np.arange(99, 1000, 100), np.arange(9, 100, 10)], axis=1).ravel()
    np.testing.assert_array_equal(got, want)


def test_meta_gives_the_dtype_and_kwargs_reach_the_function():
    x = tg.from_numpy(np.arange(10), chunks=5)
    r = x.map_blocks(np.max, axis=0, keepdims=True, dtype=x.dtype, chunks=(1,))
    np.testing.assert_array_equal(r.compute(), [4, 9])
    m = x.map_blocks(lambda b: b[2], meta=np.array((), dtype=np.float32))
    assert m.dtype == np.float32
    named = x.map_blocks(lambda b: b + 1, token="increment")
    assert named.name.startswith("increment-")


def test_a_kwargs_function_does_not_get_block_id_as_in_dask():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    seen = []

    def func(block, **kwargs):
        seen.append(sorted(kwargs))
        return block

    x.map_blocks(func, dtype=float).compute(backend="sync")
    assert seen == [[], []]
    pinned = x.map_blocks(func, block_id=7, dtype=float)  # a plain keyword for it
    seen.clear()
    pinned.compute(backend="sync")
    assert seen == [["block_id"], ["block_id"]]


def test_signature_is_read_once_when_built_and_partials_and_classes_work():
    x = tg.from_numpy(np.zeros(6), chunks=((4, 2),))

    def offset(block, scale, block_info=None):
        return block + scale * block_info[None]["array-location"][0][0]

    p = x.map_blocks(functools.partial(offset, scale=2.0))
    np.testing.assert_array_equal(p.compute(), [0, 0, 0, 0, 8, 8])

    class Ids:
        def __call__(self, block, block_id=None):
            return block + block_id[0]

    np.testing.assert_array_equal(x.map_blocks(Ids()).compute(), [0, 0, 0, 0, 1, 1])
    assert np.add(x, 1).compute().sum() == 6  # a ufunc has no signature: nothing passed


def test_block_keywords_run_on_the_threads_and_processes_of_other_backends(backend_options):
    x = tg.from_numpy(np.zeros((5, 4)), chunks=((2, 3), (3, 1)))

    def func(block, block_id=None, block_info=None):
        (r0, _), (c0, _) = block_info[None]["array-location"]
        return block + 100 * block_id[0] + 10 * block_id[1] + r0 + c0

    want = np.zeros((5, 4))
    for i, j in itertools.product(range(2), range(2)):
        (r0, r1), (c0, c1) = locations(x.chunks, (i, j))
        want[r0:r1, c0:c1] = 100 * i + 10 * j + r0 + c0
    np.testing.assert_array_equal(x.map_blocks(func).compute(**backend_options), want)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_block_info_matches_the_blocks_on_random_uneven_grids(data):
    """Every block's block_info describes exactly that block: the input's slice at
    array-location equals the block itself, and the output's chunk-shape its shape."""
    from _blocked import uneven_chunks

    shape = tuple(data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3)))
    chunks = tuple(data.draw(uneven_chunks(n)) for n in shape)
    a = np.arange(np.prod(shape), dtype=float).reshape(shape)
    x = tg.from_numpy(a, chunks=chunks)

    def check(block, block_info=None, block_id=None):
        info = block_info[0]
        where = tuple(slice(s, e) for s, e in info["array-location"])
        assert np.array_equal(block, a[where])
        assert info["chunk-location"] == block_id == block_info[None]["chunk-location"]
        assert block_info[None]["chunk-shape"] == block.shape
        assert info["num-chunks"] == x.numblocks and info["shape"] == shape
        return -block

    np.testing.assert_array_equal(x.map_blocks(check).compute(backend="sync"), -a)


def test_bad_input_is_refused_when_built():
    x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
    with pytest.raises(TypeError, match="not callable"):
        tg.map_blocks(3, x)
    with pytest.raises(TypeError, match="give at least one tilegraph Array argument"):
        tg.map_blocks(np.sin, 1.0)
    with pytest.raises(TypeError, match="give dtype="):
        tg.map_blocks(lambda block_info=None: 1 / 0, chunks=((2,),))

    def wants(block, block_id=None):
        return block

    with pytest.raises(TypeError, match="gets block_id= from map_blocks"):
        x.map_blocks(wants, block_id=(0, 0))
    with pytest.raises(ValueError, match="drop_axis=5 is out of range"):
        x.map_blocks(np.sum, drop_axis=5)
    with pytest.raises(ValueError, match=r"new_axis=\[0, 0\] repeats"):
        x.map_blocks(lambda b: b[None, None], new_axis=[0, 0])
    with pytest.raises(TypeError, match="drop_axis must be an int"):
        x.map_blocks(np.sum, drop_axis="rows")
    with pytest.raises(ValueError, match="do not pair along axis"):
        tg.map_blocks(np.add, x, tg.ones((5, 4), chunks=(2, 2)))
    with pytest.raises(ValueError, match="negative block size"):
        x.map_blocks(lambda b: b, chunks=(-1, 2))
    with pytest.raises(ValueError, match="block grid"):
        x.map_blocks(lambda b: b, chunks=((3,), (2, 2)))


def test_map_overlap_passes_block_info_of_the_extended_blocks():
    x = tg.from_numpy(np.arange(10.0), chunks=((4, 6),))
    seen = {}

    def func(block, block_info=None):
        seen[block_info[None]["chunk-location"]] = block_info[0]["array-location"]
        return block

    got = x.map_overlap(func, depth=1, boundary="periodic").compute(backend="sync")
    np.testing.assert_array_equal(got, np.arange(10.0))
    assert seen == {(0,): [(0, 6)], (1,): [(6, 14)]}  # the blocks with their halos


def test_an_array_with_block_keywords_pickles_with_its_plan():
    import cloudpickle

    x = tg.from_numpy(np.zeros(7), chunks=((3, 4),))

    def func(block, block_info=None):
        (start, stop), = block_info[None]["array-location"]
        return block + np.arange(start, stop)

    again = cloudpickle.loads(cloudpickle.dumps(x.map_blocks(func)))
    np.testing.assert_array_equal(again.compute(), np.arange(7.0))
