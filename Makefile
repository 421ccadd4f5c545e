# Two commands do all the set-up on a fresh machine (python3 >= 3.11 with venv, and PyPI):
#   make run   - create .venv if needed, install tilegraph alone (its core dependencies, no
#                extras), then run the main job, `tilegraph demo`
#   make test  - create .venv if needed, install the test and mpi extras, lint, install the
#                Debian packages graphviz, chromium and iproute2 when they are missing (only
#                as root where apt-get exists, with apt's output hidden; see sysdeps), then
#                run the test suite
# Each install has its own stamp, so either command may come first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint bench clean sysdeps array-api dask-suite

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# the demo needs the core package only
$(RUN_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

# the tests, the linter, the benchmarks and the MPI backend
$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test,mpi]'
	touch $@

# Debian packages the tests use (Graphviz draws LambdaPACK DAGs; headless Chromium runs the
# service's dashboard test; iproute2's ip and tc make the emulated hosts of tests/cluster);
# installed when missing and this is a Debian machine we may administer, else the tests
# that need them say so and are skipped.
SYSPKGS_MISSING = $(if $(shell command -v dot),,graphviz) \
                  $(if $(shell command -v chromium),,chromium) \
                  $(if $(shell command -v ip),,iproute2)
sysdeps:
	@[ -z "$(strip $(SYSPKGS_MISSING))" ] || { command -v apt-get >/dev/null 2>&1 && \
	  [ "$$(id -u)" = 0 ] && (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSPKGS_MISSING) >/dev/null); \
	  } || true

run: $(RUN_STAMP)
	$(VENV)/bin/tilegraph demo

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check tilegraph tests bench

# two processes (pytest-xdist), a test file each at a time: most tests wait on ranks,
# servers and subprocesses, so two keep the 2 cores busy
test: lint sysdeps
	$(PY) -m pytest -q -n 2 --dist loadfile

# dask's own array, bag and delayed test modules, on dask's scheduler and with every compute
# routed through tilegraph.get, compared test by test (long: about half an hour).
dask-suite: $(TEST_STAMP)
	$(PY) tests/dask_suite/run.py --out dask-suite-results

bench: $(TEST_STAMP)
	$(PY) bench/scheduler_overhead.py
	$(PY) bench/chain_memory.py
	$(PY) bench/planning.py
	$(PY) bench/elementwise_chain.py
	$(PY) bench/matmul.py
	$(PY) bench/out_of_core_matmul.py
	$(PY) bench/spill_chain.py
	$(PY) bench/placement_volume.py
	$(PY) bench/placement_cases.py
	$(PY) bench/gram_spill.py
	$(PY) bench/mpi_matmul.py
	$(PY) bench/linalg.py
	$(PY) bench/lambdapack.py
	$(PY) bench/interop.py
	$(PY) bench/service_load.py
	mkdir -p bench/results
	$(PY) bench/suite.py --csv bench/results/suite.csv --png bench/results/suite.png

# The Array API conformance suite (data-apis/array-api-tests, a checkout outside this
# project) against tilegraph and array-api-strict in one run; prints both pass counts.
ARRAY_API_TESTS ?= ../shared/array-api-tests
array-api: $(TEST_STAMP)
	$(PY) -m pip install --quiet -e '.[array-api]'
	$(PY) bench/array_api.py --suite $(ARRAY_API_TESTS) --failures

clean:
	rm -rf $(VENV) build *.egg-info
