"""docs/api-index.md is the listing of where every Array method and namespace name is
defined, as the code is now."""

import subprocess
import sys

import tilegraph as tg
from tilegraph import api_index


def test_the_index_in_docs_is_the_listing_of_the_code():
    with open(api_index.DOC) as f:
        assert f.read() == api_index.listing(), \
            "docs/api-index.md is stale: run python -m tilegraph.api_index --write"


def test_every_method_and_name_is_listed_where_it_is_defined():
    text = api_index.listing()
    for name in ("sum", "rechunk", "map_blocks", "compute", "__array_ufunc__"):
        assert f"| `{name}` |" in text.split("## `tilegraph`")[0]
    for name in ("ones", "map_blocks", "compute", "from_zarr", "einsum"):
        assert f"| `{name}` |" in text.split("## `tilegraph`")[1]
    # a method bound at import time names the factory that made it and what it calls;
    # both are found by a search in the files named
    path, qual = api_index.where(tg.Array, "sum")
    assert path == "tilegraph/array/api_table.py"
    assert "def _reduction_method" in open(f"{api_index.ROOT}/{path}").read()
    inner = qual.split("calling ")[1]
    inner_path, inner_name = inner.split(": ")
    assert f"def {inner_name}(" in open(f"{api_index.ROOT}/{inner_path}").read()
    assert api_index.where(tg.Array, "shape") == ("tilegraph/array/core.py",
                                                  "Array.__slots__")
    assert api_index.where(tg, "sqrt")[0] in ("numpy", "tilegraph/array/ufuncs.py",
                                              "tilegraph/array/elementwise.py")


def test_check_fails_on_a_stale_index_and_names_the_fix(tmp_path, monkeypatch):
    stale = tmp_path / "api-index.md"
    stale.write_text("# old\n")
    monkeypatch.setattr(api_index, "DOC", str(stale))
    assert api_index.main(["--check"]) == 1
    assert api_index.main(["--write"]) == 0
    assert api_index.main(["--check"]) == 0
    proc = subprocess.run([sys.executable, "-m", "tilegraph.api_index", "--write", "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "not allowed with" in proc.stderr
