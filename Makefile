# Two entry points for a fresh machine (see README): `make demo` and `make test`.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
OUT ?= reproduce-out

.PHONY: install install-test browser demo test test-fast bench-seg bench-throughput

install:
	$(PIP) install -q "torch==2.13.0" || $(PIP) install -q torch
	$(PIP) install -q -e .

install-test: install
	$(PIP) install -q -e ".[test]"

# Debian's Chromium for the browser tests (report page, explorer); Playwright drives it, never downloads a browser.
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

demo: install
	headsim reproduce --out $(OUT)

test: install-test browser
	@$(PYTHON) .ci/versions.py
	$(PYTHON) -m pytest -p no:cacheprovider -n auto --maxprocesses 4 --dist loadfile

test-fast: install-test
	@$(PYTHON) .ci/versions.py
	$(PYTHON) -m pytest -q -m "not slow and not browser" -n auto --maxprocesses 4 --dist loadfile

bench-seg: install
	$(PIP) install -q -e ".[bench]"
	$(PYTHON) benchmarks/segmentation.py --json benchmarks/results/segmentation.json --plot docs/img/segmentation_loso.png

bench-throughput: install
	$(PYTHON) benchmarks/throughput.py --device cpu --json benchmarks/results/throughput-cpu.json
