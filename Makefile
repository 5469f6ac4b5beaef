# pedl: `make demo` runs the main job on a fresh machine; `make test` passes the whole suite.
# The agents of the suite run their tasks as other users (each user's own uid on a root agent), with the venv's
# python3 and pedl, as a production agent does with an install every user can read: the interpreter must lie
# where they may enter. pyenv's lives under /root (0700), so Debian's python3.11 is taken where there is one.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3)
VENV ?= .venv
BIN := $(VENV)/bin
DET_VENV ?= .venv-det
# the task environment of the Keras tests: Determined 0.38.1's determined.keras needs TensorFlow 2.13 to 2.15 (Keras 2)
DET_TF_VENV ?= .venv-det-tf
TENSORFLOW_VERSION ?= 2.15.1
# the det venv is also the task environment of Determined's e2e suite (uid 65533 in test_non_root_experiment)
DET_PYTHON ?= $(PYTHON)
# Determined's e2e suite (run.sh makes its runner's venv, .venv-e2e, beside it on the first run)
DET_E2E_SUITE ?= $(abspath ../shared/determined-e2e-0.38.1)
TORCH_VERSION ?= 2.13.0
TORCHVISION_VERSION ?= 0.28.0
PYTEST_ARGS ?=
# what ruff checks and formats (`make format` rewrites them as `make test` wants them)
PY_SOURCES := src tests benchmarks tools examples
# most of the suite waits on real processes, so it runs in parallel even on 2 cores; `serial`
# tests (they restart PostgreSQL) run after it, beside the browser tests (Playwright's sync API
# holds an asyncio loop open in its process), which have a pass of their own. Workers take tests 4 at a time, so the long
# e2e tests (collected first under xdist) spread over all of them. Exit status 5 = nothing selected.
PYTEST_WORKERS ?= 4
# where the browser and serial tests live: those passes collect only these (a whole collection is ~15 s of CPU
# per process); tests/conftest.py refuses a browser or serial test anywhere else
BROWSER_TESTS := tests/browser
SERIAL_TESTS := tests/e2e/test_postgres_restart_e2e.py
SERIAL_LOG := /tmp/pedl-serial-pass.$(shell id -u).log
# `make test` prepares in parallel (SETUP_JOBS recipes at a time): the two venvs, chromium, and dockerd with the
# task image's debootstrap base (network-bound) all install side by side; pip into one venv, and apt, each run
# one at a time under a lock (flock, from util-linux).
SETUP_JOBS ?= 4
PIP = flock $(VENV)/.pip-lock $(BIN)/pip
APT_GET = flock /tmp/pedl-apt.lock apt-get

.PHONY: test-browser-and-serial venv install install-test install-torch det-venv det-tf-venv det-e2e-venv det-e2e compat-e2e demo setup setup-parts test test-setup test-bytecode test-fast lint format typecheck bench clean postgres-check webui chromium \
	sshd docker docker-base

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(BIN)/python

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(PIP) install -q -e .
	touch $@

install: $(VENV)/.installed webui

# the WebUI: libraries from the npm registry through the lockfile, bundled by esbuild into the package
WEBUI_OUT := src/pedl/webui/static/index.html
WEBUI_SRC := $(shell find web/src -type f 2>/dev/null) web/build.mjs web/package-lock.json
web/node_modules/.package-lock.json: web/package-lock.json
	@command -v npm >/dev/null || { echo "make webui: npm is missing (apt-get install nodejs npm)"; exit 1; }
	cd web && npm ci --no-audit --no-fund --loglevel=error
$(WEBUI_OUT): web/node_modules/.package-lock.json $(WEBUI_SRC)
	node web/build.mjs
webui: $(WEBUI_OUT)

# browser tests drive Debian's chromium (never a browser download); as root the target installs it
chromium:
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
	  $(APT_GET) install -y -q chromium >/dev/null 2>&1 || { $(APT_GET) update -q >/dev/null && $(APT_GET) install -y -q chromium >/dev/null; } \
	  || echo "chromium could not be installed: the browser tests skip (and fail under CI)"; \
	  else echo "chromium is missing: sudo apt-get install chromium (the browser tests skip, or fail under CI)"; fi; }

# shells run OpenSSH's sshd as the task's user, and their tests open them with ssh: Debian's openssh-server and
# openssh-client, installed as root (no daemon is started; each shell starts its own sshd)
sshd:
	@{ [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null; } || { if [ "$$(id -u)" = 0 ]; then \
	  $(APT_GET) install -y -q openssh-server openssh-client >/dev/null 2>&1 || { $(APT_GET) update -q >/dev/null && $(APT_GET) install -y -q openssh-server openssh-client >/dev/null; } \
	  || echo "openssh-server could not be installed: the shell tests skip (and fail under CI)"; \
	  else echo "sshd is missing: sudo apt-get install openssh-server openssh-client (the shell tests skip, or fail under CI)"; fi; }
	@if [ "$$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi

# task containers run under Debian's docker.io; their test image is built from Debian packages by debootstrap
# and `docker import`, never pulled (tests/support/docker.py). As root the target installs both, starts dockerd
# when no daemon answers, and builds the image. Without them the container tests skip, and under CI they fail.
# docker-base needs no venv (tests/support/docker_base.py is standard library only): under `make test` the
# debootstrap runs while the venvs install; the layers from the venvs come after, in `docker`.
DOCKERD_LOG ?= /tmp/pedl-dockerd.log
DOCKER_MISSING = echo "$(1): the container tests skip (and fail under CI)"; if [ -n "$$CI" ]; then exit 1; fi
docker-base:
	@{ command -v dockerd >/dev/null && command -v debootstrap >/dev/null; } || { if [ "$$(id -u)" = 0 ]; then \
	  $(APT_GET) install -y -q docker.io debootstrap >/dev/null 2>&1 || { $(APT_GET) update -q >/dev/null && $(APT_GET) install -y -q docker.io debootstrap >/dev/null; } \
	  || { $(call DOCKER_MISSING,docker.io and debootstrap could not be installed); }; \
	  else $(call DOCKER_MISSING,Docker or debootstrap is missing (sudo apt-get install docker.io debootstrap)); fi; }
	@docker info >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && command -v dockerd >/dev/null; then \
	  echo "starting dockerd (log: $(DOCKERD_LOG))"; setsid dockerd >>$(DOCKERD_LOG) 2>&1 </dev/null & \
	  for i in $$(seq 30); do docker info >/dev/null 2>&1 && break; sleep 1; done; fi; \
	  docker info >/dev/null 2>&1 || { $(call DOCKER_MISSING,no Docker daemon answers (dockerd log: $(DOCKERD_LOG))); }; }
	@! docker info >/dev/null 2>&1 || $(PYTHON) -m tests.support.docker_base \
	  || { $(call DOCKER_MISSING,the base of the task test image could not be built); }

docker: install-test det-venv docker-base
	@! docker info >/dev/null 2>&1 || $(BIN)/python -m tests.support.docker \
	  || { $(call DOCKER_MISSING,the task test image could not be built); }

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]'
	touch $@

install-test: $(VENV)/.installed-test webui

# torch is pinned to the CPU build; a plain `torch` requirement would pull GBs of CUDA packages
$(VENV)/.installed-torch: $(BIN)/python
	$(PIP) install -q torch==$(TORCH_VERSION)
	touch $@

install-torch: $(VENV)/.installed-torch

# the real det CLI lives in its own venv: it pins requests<2.32 and pulls packages pedl must not depend on.
# It is also the task environment of the Determined Core API and Trial API tests: det.core.init() needs torch
# (and tensorboard) for its metric writer, as in Determined's own images; torch is the pinned CPU build.
# torchvision (Determined's mnist_pytorch fixture) is PyPI's CUDA build, whose C++ ops cannot load beside
# the CPU torch: tools/torchvision_without_ops.py lets it import without them.
# Under CI a failed install fails the target: a skipped compatibility suite would hide regressions.
DET_VENV_MISSING := determined==0.38.1 could not be installed into $(DET_VENV)
$(DET_VENV)/.installed:
	$(DET_PYTHON) -m venv $(DET_VENV)
	$(DET_VENV)/bin/pip install -q determined==0.38.1 torch==$(TORCH_VERSION) torchvision==$(TORCHVISION_VERSION) tensorboard jupyterlab \
	  && $(DET_VENV)/bin/python tools/torchvision_without_ops.py \
	  || { if [ -n "$$CI" ]; then echo "$(DET_VENV_MISSING); under CI the compat tests must run: fix the install"; \
	       exit 1; else echo "$(DET_VENV_MISSING); the compat tests will skip"; fi; }
	touch $@

# TensorFlow's own venv (Keras 2 is tensorflow-cpu's own keras 2.15; tf-keras would pull the CUDA tensorflow)
DET_TF_VENV_MISSING := determined==0.38.1 and tensorflow-cpu==$(TENSORFLOW_VERSION) could not be installed into $(DET_TF_VENV)
$(DET_TF_VENV)/.installed:
	$(DET_PYTHON) -m venv $(DET_TF_VENV)
	$(DET_TF_VENV)/bin/pip install -q determined==0.38.1 tensorflow-cpu==$(TENSORFLOW_VERSION) \
	  || { if [ -n "$$CI" ]; then echo "$(DET_TF_VENV_MISSING); under CI the Keras tests must run: fix the install"; \
	       exit 1; else echo "$(DET_TF_VENV_MISSING); the Keras tests will skip"; fi; }
	touch $@

det-tf-venv: $(DET_TF_VENV)/.installed

# DeepSpeed beside it, built without its C++/CUDA ops (none compile here): its DeepSpeedTrial test ends at
# Determined's need for GPUs. A marker of its own, so that a det venv made before it gets it too.
DEEPSPEED_VERSION ?= 0.19.8
$(DET_VENV)/.installed-deepspeed: $(DET_VENV)/.installed
	DS_BUILD_OPS=0 $(DET_VENV)/bin/pip install -q --use-pep517 deepspeed==$(DEEPSPEED_VERSION) \
	  || { if [ -n "$$CI" ]; then echo "deepspeed could not be installed into $(DET_VENV)"; exit 1; \
	       else echo "deepspeed could not be installed into $(DET_VENV): its test will skip"; fi; }
	touch $@

# the suite runner's own venv, as run.sh makes it, made here so that make test's setup installs it in parallel
det-e2e-venv:
	@if [ -d $(DET_E2E_SUITE) ] && [ ! -x $(DET_E2E_SUITE)/.venv-e2e/bin/pytest ]; then \
	  $(PYTHON) -m venv $(DET_E2E_SUITE)/.venv-e2e && \
	  $(DET_E2E_SUITE)/.venv-e2e/bin/pip install -q determined==0.38.1 pytest pytest-timeout "kubernetes==31.0.0"; fi

# the marker may stand from a failed install outside CI; under CI the det executable itself must be there
det-venv: $(DET_VENV)/.installed $(DET_VENV)/.installed-deepspeed
	@if [ -n "$$CI" ] && [ ! -x $(DET_VENV)/bin/det ]; then \
	  echo "$(DET_VENV)/bin/det is missing; under CI the compat tests must run: rm -rf $(DET_VENV) && make det-venv"; \
	  exit 1; fi

# Determined's own e2e suite (../shared/determined-e2e-0.38.1, run by its run.sh) against a fresh pedl master
# and one local agent. DET_E2E_ARGS go to pytest (`-k test_users` picks one file). `compat-e2e` passes when
# every test passes but those tools/det_e2e_exclusions.yaml lists (with reasons), and fails on a listed one
# that passes. `make test` runs it too, as one test of its main pass (tests/compat/test_determined_e2e_suite.py).
DET_E2E_ARGS ?=
det-e2e: install det-venv det-e2e-venv
	$(BIN)/python tools/det_e2e.py $(DET_E2E_ARGS)

compat-e2e: install det-venv det-e2e-venv
	$(BIN)/python tools/det_e2e.py --tb=native --exclusions tools/det_e2e_exclusions.yaml $(DET_E2E_ARGS)

demo: install
	$(BIN)/python -m pedl.demo

postgres-check: $(VENV)/.installed
	@$(BIN)/python -c "from tests.support.databases import postgres_error as e; m = e(); print(m) if m else None; raise SystemExit(1 if m else 0)" \
	  || { if [ -n "$$CI" ]; then echo "make test: PostgreSQL must be reachable under CI (start it: pg_ctlcluster --skip-systemctl-redirect \$$(ls /etc/postgresql) main start)"; exit 1; else echo "PostgreSQL unreachable: its tests will be skipped"; fi; }

test:
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target test-setup
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/pyright
	cd web && npm test --silent
	PEDL_DET_E2E=$(DET_E2E_SUITE) $(BIN)/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --maxschedchunk 4 -m "not serial and not browser" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	@$(MAKE) --no-print-directory test-browser-and-serial

# the serial tests (they restart PostgreSQL) run beside the browser tests (their masters use SQLite); the serial
# pass's output follows the browser pass's, and either failing fails the target
test-browser-and-serial:
	@rm -f $(SERIAL_LOG); ( $(BIN)/pytest -q -p no:cacheprovider -m serial $(SERIAL_TESTS) $(PYTEST_ARGS) \
	  > $(SERIAL_LOG) 2>&1 || [ $$? -eq 5 ] ) & serial=$$!; \
	echo "$(BIN)/pytest -q -p no:cacheprovider -n 2 -m \"browser and not serial\" $(BROWSER_TESTS) $(PYTEST_ARGS)"; \
	$(BIN)/pytest -q -p no:cacheprovider -n 2 -m "browser and not serial" $(BROWSER_TESTS) $(PYTEST_ARGS); \
	browser=$$?; [ $$browser -eq 5 ] && browser=0; wait $$serial; rc=$$?; \
	echo "$(BIN)/pytest -q -p no:cacheprovider -m serial $(SERIAL_TESTS) $(PYTEST_ARGS)"; cat $(SERIAL_LOG); \
	[ $$browser -eq 0 ] && [ $$rc -eq 0 ]

# what needs root or the network, once: the venvs, the WebUI's npm packages, Debian's chromium, openssh-server,
# docker.io and debootstrap, dockerd and the task image. Each part is skipped where it is there already, so
# `make test` runs setup first and only what is missing runs (SETUP_JOBS recipes side by side).
setup:
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target setup-parts

setup-parts: install-test install-torch det-venv det-tf-venv det-e2e-venv chromium sshd docker

test-setup: setup-parts postgres-check test-bytecode

# the suite's bytecode, written once (under `make test`, while the task image builds). Where
# PYTHONDONTWRITEBYTECODE is set (this machine's environment sets it) no process writes any, so each master,
# agent and CLI process compiled pedl's sources again (~0.2 s of CPU; an at-head migrate.upgrade 43 -> 17 ms),
# and each of the passes' 7 pytest processes rewrote the asserts of every test module (a collection: 27 -> 14 s
# of CPU). pytest reads its cache of rewritten modules even where it may not write one. A collection error
# here is left for the passes to report.
test-bytecode: install-test install-torch
	$(BIN)/python -m compileall -q -j 0 src tests
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider --collect-only >/dev/null 2>&1 || true

test-fast: install-test
	$(BIN)/pytest -q -x -m "not e2e and not compat" $(PYTEST_ARGS)

# pyright over src/pedl as pyproject.toml's [tool.pyright] says (standard mode). The pyright wheel carries its
# JavaScript; it runs on the system's node.
PYRIGHT_NODE_MISSING := echo "make typecheck: node is missing (apt-get install nodejs)"; exit 1
typecheck: install-test
	@command -v node >/dev/null || { $(PYRIGHT_NODE_MISSING); }
	$(BIN)/pyright

lint: install-test
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	@$(MAKE) --no-print-directory typecheck

# rewrites the Python sources as `ruff format --check` wants them
format: install-test
	$(BIN)/ruff format $(PY_SOURCES)

bench: install-test
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) $(DET_VENV) $(DET_TF_VENV) .demo build dist *.egg-info web/node_modules src/pedl/webui/static
