# Two commands on a fresh Debian/Ubuntu machine with Python 3.11+:
#   make run    set up what the app needs (apt: the poems; venv; pip) and start it on http://localhost:8501
#   make test   set up what the tests need too (apt: Chromium, a CJK font, nginx; dev packages), then lint and every test
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Debian packages: the Tang poems / Song ci corpus and Graphviz (diagrams laid out on the server) for the app;
# Chromium and a CJK font for the browser tests; nginx for the replica test (tests/test_replicas.py, which
# starts its own nginx on a free loopback port).
APT_RUN  := $(shell cat packages.txt)
APT_TEST := chromium fonts-wqy-microhei nginx
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test lint bench catalogs clean

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

# The app's packages. requirements.txt names PyTorch's CPU wheel by its address (for Community Cloud); locally
# that line becomes torch==<the same version>, and pip takes the wheel it finds for it (PyPI's, or a local CPU
# wheel where pip is set up with one).
$(VENV)/.app: requirements.txt packages.txt
	$(call apt_install,$(APT_RUN))
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
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
	$(VENV)/bin/streamlit run serve.py

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .

# About 30 minutes on 2 cores: lint, engine and page tests, then the browser and load tests (progress shown).
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

bench: $(VENV)/.app
	$(PY) -m engine.bench attention
	$(PY) -m engine.bench train
	$(PY) -m engine.bench pages

clean:
	rm -rf $(VENV) .pytest_cache runs
