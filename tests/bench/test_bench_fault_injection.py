"""The fault-injection run: a transient failure at every position of every fused chain of
op kinds, with retries, gives the clean run's (and NumPy's) result."""

from _bench_modules import bench_module

faults = bench_module("fault_injection")


def test_no_wrong_result_at_any_fault_site():
    outcomes = faults.run({"backend": "threads", "workers": 2, "progress": False})
    chains = {kind for o in outcomes for kind in o.chain.split("+")}
    # between them the programs fuse every fusable kind the array front end emits
    assert {"accumulate", "map", "store", "elementwise", "partial", "reduce", "aggregate",
            "transpose", "getitem", "rechunk", "reshape", "load", "creation", "random",
            "product", "syrk", "gemm", "trsm", "potrf"} <= chains
    bad = [o for o in outcomes if o.wrong or o.errors]
    assert not bad, bad
    assert sum(o.sites for o in outcomes) > 200
