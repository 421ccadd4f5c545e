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


def test_no_silent_mix_when_a_remade_source_changed_or_does_not_repeat():
    outcomes = {(o.probe, o.limit): o for o in faults.run_remake_probes(
        {"backend": "threads", "workers": 2, "progress": False})}
    assert not [o for o in outcomes.values() if o.silent]
    # repeatable sources are remade under the tight budget, and give NumPy's result
    for probe in ("random, seeded (repeatable)", "zarr, unchanged (repeatable)"):
        o = outcomes[(probe, "tight")]
        assert o.clean == o.runs == 1 and o.remade > 0 and o.spilled == 0
    # a source that does not repeat is spilled, never read again
    o = outcomes[("from_array of fresh reads", "tight")]
    assert o.clean == 1 and o.spilled > 0 and o.remade == 0
    # declared repeatable, it is read again: the difference is an error
    assert outcomes[("... declared repeatable=True", "tight")].errors == 1
    # a source changed during the run is an error at every moment, under both budgets
    changed = [o for (p, _), o in outcomes.items() if p.startswith(("zarr, chunks", "memmap",
                                                                    "npy"))]
    assert len(changed) == 10 and all(o.errors == o.runs == 3 for o in changed)
