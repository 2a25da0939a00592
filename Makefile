# Two commands on a fresh Debian/Ubuntu machine with Python 3.11+:
#   make run    set up (apt packages, virtual environment, pip) and start the app on http://localhost:8501
#   make test   set up and run every test (engine, pages under AppTest, real browser in headless Chromium)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Debian packages: the Tang poems / Song ci corpus; Chromium and a CJK font for the browser test.
APT_PACKAGES := fortunes-zh chromium fonts-wqy-microhei
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup apt venv run test bench clean

setup: apt venv

apt:
	@if command -v apt-get >/dev/null 2>&1; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then \
	    echo "apt-get install$$missing"; \
	    $(SUDO) apt-get update -q && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  fi; \
	else \
	  echo "No apt-get: the app falls back to English text; install 'fortunes-zh' for the Tang poems."; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

run: setup
	$(VENV)/bin/streamlit run app.py

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) -m engine.bench attention
	$(PY) -m engine.bench train
	$(PY) -m engine.bench pages

clean:
	rm -rf $(VENV) .pytest_cache runs
