"""Measuring runs: time and peak resident memory."""

import numpy as np
from _bench_modules import bench_module

measure = bench_module("measure")


def test_peak_rss_sees_numpy_allocations():
    def allocate():
        a = np.ones(40 * 2**20 // 8)  # 40 MiB, touched
        return float(a.sum())

    seconds, peak, result = measure.measure(allocate, repeat=2)
    assert result == 40 * 2**20 // 8
    assert seconds > 0
    assert peak >= 30 * 2**20
