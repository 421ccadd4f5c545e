"""bench/cull.py: every case gives NumPy's slice on both systems, and a timing run prints
its table (tiny sizes; the figures are taken on a quiet machine)."""

import pytest
from _bench_modules import bench_module

cull = bench_module("cull")


def test_every_case_matches_numpy_on_both_systems(capsys):
    pytest.importorskip("dask")
    assert cull.main(["--check", "--n", "200", "--block", "20"]) == 0
    out = capsys.readouterr().out
    assert out.count("equals NumPy's for both systems") == len(cull.CASES)


def test_a_timing_run_prints_a_row_per_case_and_system(capsys):
    pytest.importorskip("dask")
    assert cull.main(["--n", "200", "--block", "20", "--repeat", "1",
                      "--case", "map_overlap", "--case", "slice of sum"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["case", "system"]
    assert [ln.split()[0] for ln in lines[1:]] == ["map_overlap", "dask", "slice", "dask"]
    name, n, system, _, _, tasks, uncut, _ = lines[1].split()
    assert (name, n, system) == ("map_overlap", "200", "tilegraph")
    # a map_overlap's slice across a block boundary: 24 tasks of the 10 x 10 blocks' 1,086
    assert (tasks, uncut) == ("24", "1,086")


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        cull.main(["--n", "0"])
    with pytest.raises(SystemExit):
        cull.main(["--case", "no such case"])
