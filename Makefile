# Two commands on a fresh Debian/Ubuntu machine with Python 3.11+:
#   make run    set up what the app needs (apt: the poems; venv; pip) and start it on http://localhost:8501
#   make test   set up what the tests need too (apt: Chromium, a CJK font, nginx; dev packages), then lint and every test
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# make run PORT=8502 ADDRESS=0.0.0.0: where the app listens (Streamlit's --server.port and --server.address);
# unset, Streamlit's own settings (port 8501 on every interface, or STREAMLIT_SERVER_PORT and the like).
PORT    ?=
ADDRESS ?=
# TORCH=cpu or TORCH=cuda overrides the PyTorch build tools/torch_index.py chooses (on a fresh .venv: make clean).
TORCH   ?=
# Debian packages: the Tang poems / Song ci corpus and Graphviz (diagrams laid out on the server) for the app;
# Chromium and a CJK font for the browser tests; nginx for the replica test (tests/operations/test_replicas.py, which
# starts its own nginx on a free loopback port).
APT_RUN  := $(shell cat packages.txt)
APT_TEST := chromium fonts-wqy-microhei nginx
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run check test lint bench catalogs clean

define apt_install
	@if command -v apt-get >/dev/null 2>&1; then \
	  missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "apt-get install$$missing"; \
	    $(SUDO) apt-get update -q && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  fi; \
	else \
	  echo "No apt-get: skipping$(1) (see README)"; \
	fi
endef

# The app's packages. PyTorch first, from the index tools/torch_index.py chooses for this machine: PyTorch's CPU
# wheel index on Linux without a CUDA GPU (PyPI's wheel where that index cannot be reached), PyPI's CUDA build
# with a CUDA GPU or TORCH=cuda; TORCH=cpu asks for the CPU build anyway. Then the rest of requirements.txt,
# whose torch addresses (for Community Cloud) become torch==<the same version>, which the installed build meets.
$(VENV)/.app: requirements.txt packages.txt tools/torch_index.py
	$(call apt_install,$(APT_RUN))
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	torch_args="$$(TORCH="$(TORCH)" $(PY) tools/torch_index.py requirements.txt)" && $(PY) -m pip install -q $$torch_args
	sed -E 's|^torch @ [^ ]*/torch-([^-]+)%2Bcpu-[^ ]*|torch==\1|' requirements.txt > $(VENV)/requirements.local.txt
	$(PY) -m pip install -q -r $(VENV)/requirements.local.txt
	touch $@

$(VENV)/.dev: $(VENV)/.app requirements-dev.txt
	$(call apt_install,$(APT_TEST))
	$(PY) -m pip install -q -r requirements-dev.txt
	# The book's MultiHeadAttention, the attention benchmark's reference: its metadata asks for tensorflow and
	# jupyterlab, but the module the benchmark uses (ch03) needs torch only.
	$(PY) -m pip install -q --no-deps llms-from-scratch==1.0.19
	touch $@

run: $(VENV)/.app
	$(VENV)/bin/streamlit run serve.py$(if $(PORT), --server.port $(PORT))$(if $(ADDRESS), --server.address $(ADDRESS))

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .

# The fast tier, for the loop of work: lint, the engine, ui and content tests, the whole-tree rules, and one AppTest
# run of every page inside the app (the `smoke` marker); no page suites, no Chromium, no installs or servers.
# About 140 s of CPU time in all (one process, most tests single-threaded): under 5 minutes on 2 cores at rest.
check: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -m "smoke or not (pages or browser or operations)"

# Everything. About 30 minutes on 2 cores: lint, engine and page tests, then the browser and load tests (progress shown).
test: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

# Extract messages from the code, merge them into the French and German catalogs, compile the .mo files
# (the compiled catalogs are committed: Community Cloud runs no build step).
catalogs: $(VENV)/.dev
	$(VENV)/bin/pybabel extract -F babel.cfg -k _ -k N_ -k ngettext:1,2 --no-location --sort-output \
	  --omit-header -o locales/messages.pot .
	$(VENV)/bin/pybabel update -i locales/messages.pot -d locales -D messages --no-fuzzy-matching --ignore-obsolete
	$(VENV)/bin/pybabel compile -d locales -D messages --statistics

# The benchmarks, then docs/performance.md made again from their assets/bench_*.json (so it cannot drift).
bench: $(VENV)/.app
	$(PY) -m engine.bench attention --json assets/bench_attention.json
	$(PY) -m engine.bench train --json assets/bench_train.json
	$(PY) -m engine.bench generate --json assets/bench_generate.json
	$(PY) -m engine.bench pages --browser --json assets/bench_pages.json
	$(PY) -m engine.bench docs

clean:
	rm -rf $(VENV) .pytest_cache runs
