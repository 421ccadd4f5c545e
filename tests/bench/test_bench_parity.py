"""bench/parity.py: docs/parity.md is the table the script makes, every name of dask.array
passes its case, and the harness itself catches a wrong result, a hidden compute and a
refusal that names no alternative."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from _bench_modules import bench_module

import tilegraph as tg

parity = bench_module("parity")
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "parity.md"


def test_the_docs_page_is_the_table_the_script_makes():
    """The names, cases, notes and refusals as the script lists them (the refusals run;
    the other cases as they are when they pass, which the heavy test below confirms)."""
    assert DOC.read_text() == parity.markdown(parity.measure(run=False)), (
        "docs/parity.md is out of date: python bench/parity.py --markdown > docs/parity.md")


def test_no_name_is_missing_or_without_a_case():
    rows = parity.measure(run=False)
    bad = [(r.section, r.name, r.status) for r in rows
           if r.status in ("missing", "untested", "differs")]
    assert not bad
    names = {r.name for r in rows if r.section == "dask.array"}
    import dask.array as da

    assert names == set(da.__all__)


def test_the_harness_catches_wrong_values_hidden_computes_and_vague_refusals():
    L = parity.libs()
    wrong = parity.Case(run=lambda lib: lib.a(parity.F) + (1 if lib.name == "tilegraph"
                                                           else 0))
    assert parity.run_case(wrong)[0] == "differs"
    hidden = parity.Case(run=lambda lib: lib.a(parity.F) + float(lib.a(parity.F).sum()))
    status, detail = parity.run_case(hidden)
    assert status == "differs" and "while building" in detail
    allowed = parity.Case(run=hidden.run, computes="asked")
    assert parity.run_case(allowed)[0] == "tested"
    vague = parity.Case(kind="refused", match="tg.other", run=lambda lib: tg.from_delayed(1))
    assert parity.run_case(vague)[0] == "differs"
    named = parity.Case(kind="refused", match="tg.from_dask", run=lambda lib: tg.from_delayed(1))
    assert parity.run_case(named)[0] == "refused"
    silent = parity.Case(kind="refused", match="x", run=lambda lib: tg.ones(3))
    assert parity.run_case(silent) == ("differs", "did not raise")
    wrong_dtype = parity.Case(run=lambda lib: lib.a(parity.I).astype(
        np.int32 if lib.name == "tilegraph" else np.int64))
    assert "dtype" in parity.run_case(wrong_dtype)[1]
    assert L["tilegraph"].a(parity.F).chunks == ((3, 3, 1), (2, 2, 1))


def test_uneven_blocks_have_a_shorter_last_block():
    assert parity.uneven((7, 5, 6, 1, 0)) == ((3, 3, 1), (2, 2, 1), (4, 2), (1,), (0,))


@pytest.mark.heavy
def test_every_name_passes_its_case():
    """All the cases run (about 15 s of CPU): nothing missing or differing, and the page
    says what they find."""
    rows = parity.measure(run=True)
    bad = [(r.section, r.name, r.notes) for r in rows
           if r.status in ("missing", "untested", "differs")]
    assert not bad
    assert DOC.read_text() == parity.markdown(rows)
