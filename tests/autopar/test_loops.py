"""The chunks a split loop runs in: every item exactly once, in order, whatever the number
of items, the container and the workers; large chunks first."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilegraph.autopar.loops import chunk_of, guided_sizes, join_parts


@given(st.integers(1, 16))
def test_guided_sizes_shrink_and_cover_the_whole(workers):
    sizes = guided_sizes(workers)
    assert sum(sizes) == 16 * workers
    assert list(sizes) == sorted(sizes, reverse=True)
    assert sizes[0] == 8 and min(sizes) == 1
    left = 16 * workers
    for s in sizes:   # each takes at most 1 / (2 * workers) of what is left, or one unit
        assert s == 1 or s <= left / (2 * workers)
        left -= s


@given(st.integers(0, 300), st.integers(1, 8),
       st.sampled_from(["list", "tuple", "range", "str", "array", "dict"]))
def test_guided_chunks_hold_every_item_once_in_order(n, workers, kind):
    base = list(range(n))
    items = {"list": base, "tuple": tuple(base), "range": range(n),
             "str": "".join(chr(65 + i % 26) for i in base), "array": np.arange(n),
             "dict": {f"k{i}": i for i in base}}[kind]
    sizes = guided_sizes(workers)
    parts = [list(chunk_of(items, k, sizes)) for k in range(len(sizes))]
    assert join_parts("list", parts) == list(items)
    # the first chunk is the largest: 1 / (2 * workers) of the items, rounded down
    assert len(parts[0]) == n * 8 // (16 * workers)
    assert all(len(p) <= len(parts[0]) + 1 for p in parts)


def test_an_iterator_is_not_split_by_sizes():
    it = iter([1, 2, 3])
    assert chunk_of(it, 0, (2, 1)) is it and chunk_of(it, 1, (2, 1)) == ()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_guided_sizes_rejects_a_bad_number_of_workers(bad):
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        guided_sizes(bad)
