# dgx_spark.glm53 - developer and CI entry points.
#   make lab          rehearse a deployment on the Spark lab (lab/README.md; NODES=4 for four nodes)
#   make test         everything CI runs: lint, sanity, unit, build, lab end-to-end, molecule
#   make setup        create .venv, install the pinned toolchain and the host tools (fast when already done)
#   make doctor       name each missing host tool and the package that provides it
#   make lint         yamllint + ansible-lint (production profile)
#   make sanity       ansible-test sanity on a copy laid out as ansible_collections/dgx_spark/glm53
#   make unit         pytest tests/unit (real page cache, pure functions)
#   make build        build the collection tarball and prove it installs alone
#   make site-vars  regenerate README.md's site-variables table from meta/site_argument_spec.yml
#   make node-requirements  regenerate roles/*/files/requirements-node.txt (the nodes' hash locks; needs PyPI)
#   make integration  end-to-end tests on the lab through ansible-runner
#   make molecule     every molecule scenario on the lab
#   make lab-up | lab-down | lab-status   (lab-up/lab-status/lab take NODES=N, default $GLM53_LAB_NODES or 2)
#   make labs-up      lab 1, then labs 2 to 4 (EXTRA_LABS) side by side: the labs make test uses
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(abspath $(VENV))/bin
STAMP  := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
# Python keeps what it compiles in __pycache__ unless PYTHONDONTWRITEBYTECODE is set, as it is on
# some machines (this sandbox's among them): then every ansible, ansible-playbook and pytest process
# compiles ansible-core, the collection and the tests from source again - about 1.3 s of CPU of a
# 2.7 s ansible-playbook start, and again in each forked worker for what it imports, over the
# thousands of runs of make test. (__pycache__ is in .gitignore; sanity and build leave it out.)
unexport PYTHONDONTWRITEBYTECODE
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
SANITY_ROOT := .build/sanity/ansible_collections/dgx_spark/glm53
# ansible-test fetches a pip bootstrap script from a host we cannot reach; put our
# stand-in (tests/sanity/get_pip.py) where it looks first. 24.2 is ansible-core 2.19's pin.
GET_PIP_CACHE := $(HOME)/.ansible/test/cache/get_pip_24_2.py

.PHONY: help setup host-tools doctor lint sanity unit test build clean lab-up labs-up lab-down lab-status lab integration molecule node-requirements site-vars

help:
	@grep -E '^#   make' $(MAKEFILE_LIST) | sed 's/^#   //'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# --no-compile: most of the ~19,000 .py files are the `ansible` package's collections, which
	# nothing here imports; what is imported is compiled on first use (and cached) instead.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-dev.txt
	touch $@

# Host tools (ping, rsync, fincore, gpg, docker.io, debootstrap, ...): one list in
# lab/host_tools.py. Checked on every setup (a which per tool), apt-installed when missing
# (CI runs as root on a fresh machine); `make doctor` names what is missing and its package.
host-tools:
	$(PYTHON) lab/host_tools.py install

doctor:
	$(PYTHON) lab/host_tools.py doctor

setup: $(STAMP) host-tools

lint: setup
	yamllint -s .
	ansible-lint --profile production

# ansible-test insists on running inside ansible_collections/<ns>/<name>; give it a
# clean copy of the tracked tree (the .collections symlink would recurse).
sanity: setup
	rm -rf .build/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -z --cached --others --exclude-standard --deduplicate | grep -zv '^\.collections/' \
	  | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C $(SANITY_ROOT)
	cd $(SANITY_ROOT) && git init -q && git add -A
	install -D -m 0644 tests/sanity/get_pip.py $(GET_PIP_CACHE)
	cd $(SANITY_ROOT) && ansible-test sanity --venv --python 3.11 --color no

# Four workers (pytest-xdist) on two cores: most unit tests wait on a child process (a module
# run, pip, rsync) or on a timeout they prove (wait_for_slots' not-ready runs wait 8 s each), so
# two workers kept the cores 70% busy. On this workplace's 2-core machine the suite took 249 s
# with two workers, 212 s with three and 192 s with four, the same CPU (345 s) each time. Tests
# that measure the page cache, and those that build a shared wheelhouse, are kept together on
# one worker each (tests/unit/conftest.py), never side by side; the wheelhouse group (74 s)
# is no longer the longest path.
# UNIT_SELECT: a marker expression (e.g. `page_cache`, or `not page_cache`); UNIT_WORKERS=0
# runs in one process.
UNIT_WORKERS ?= 4
UNIT_SELECT ?=
unit: setup
	python -m pytest tests/unit -n $(UNIT_WORKERS) --dist loadgroup $(if $(UNIT_SELECT),-m "$(UNIT_SELECT)")

# Build the tarball, install it alone (--no-deps, no checkout config) and use it.
build: setup
	mkdir -p .build && ansible-galaxy collection build --force --output-path .build .
	rm -rf .build/install && printf '[defaults]\n' > .build/empty.cfg
	ANSIBLE_CONFIG=$(abspath .build/empty.cfg) ansible-galaxy collection install --no-deps --force \
	  -p .build/install .build/dgx_spark-glm53-$(VERSION).tar.gz
	cd .build && ANSIBLE_CONFIG=$(abspath .build/empty.cfg) ANSIBLE_COLLECTIONS_PATH=$(abspath .build/install) \
	  ansible-doc dgx_spark.glm53.page_cache_evict > /dev/null
	cd .build && ANSIBLE_CONFIG=$(abspath .build/empty.cfg) ANSIBLE_COLLECTIONS_PATH=$(abspath .build/install) \
	  ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=json \
	  ansible localhost -c local -m dgx_spark.glm53.page_cache_evict -a 'paths=$(abspath README.md)' \
	  | grep -q '"file_count": 1,'
	@echo "build ok: .build/dgx_spark-glm53-$(VERSION).tar.gz installs and runs with --no-deps"

# Each stage in order, timed; the table at the end says where the time went. The lab comes up
# in the background during lint and sanity (on a fresh machine that is debootstrap and image
# builds, mostly waiting on the network and disk). The unit tests run on their own once it is
# up: beside the lab tests, at nice 10 so as not to slow those, they got a sliver of a busy
# machine (on CI's two cores 2503 s for what takes 276 s alone) and failed where a stand-in
# or a module they started could not answer within seconds. Alone they cost about 5 minutes
# of the run, and give the lab tests every core. Molecule runs on lab 1 as soon as lab 1's
# session has passed, beside the end of labs 2 and 3's (INTEGRATION_LAB1_THEN): after it the
# two cores were half idle for minutes.
TEST_STAGES := setup lab-start lint sanity lab-up unit build integration+molecule
# What each stage costs, kept in .build/test-cost: a sampler (benchmarks/test_cost.py sample)
# records the machine's busy CPU and each lab's node CPU every second, the stages' start and end
# go to stages.tsv, and a pytest plugin (benchmarks/pytest_cost) writes each lab test's
# controller and node CPU. The table at the end gives each stage's wall and CPU seconds and each
# lab test module's; make test fails when a stage's CPU is over its budget in
# tests/cost_budget.yml by more than its margin, or a module over its share of the lab stage
# does not say why. Under benchmarks/test_cost.py run, its own folder and plugin are kept.
COST_DIR := $(abspath .build/test-cost)
COST_PLUGIN := $(abspath benchmarks/pytest_cost)
test:
	@t0=$$(date +%s); rows=""; mkdir -p .build; lab=""; rm -rf $(COST_DIR); mkdir -p $(COST_DIR); \
	$(PYTHON) benchmarks/test_cost.py sample $(COST_DIR)/timeline.jsonl & sampler=$$!; \
	trap 'kill $$sampler 2>/dev/null || true; if [ -n "$$lab" ]; then wait $$lab 2>/dev/null; fi' EXIT; \
	cost_dir=$${GLM53_TEST_COST_DIR:-$(COST_DIR)}; \
	case " $${PYTEST_ADDOPTS:-} " in *" -p glm53_test_cost "*) cost_opts="$${PYTEST_ADDOPTS}" ;; \
	  *) cost_opts="$${PYTEST_ADDOPTS:-} -p glm53_test_cost" ;; esac; \
	for stage in $(TEST_STAGES); do s=$$(date +%s.%N); stage_failed=""; \
	  case $$stage in \
	  lab-start) $(MAKE) --no-print-directory labs-up > .build/lab-up.log 2>&1 & lab=$$!; continue ;; \
	  lab-up) wait $$lab || stage_failed=1; lab=""; cat .build/lab-up.log ;; \
	  integration+molecule) GLM53_TEST_COST_DIR=$$cost_dir PYTHONPATH=$(COST_PLUGIN)$${PYTHONPATH:+:$$PYTHONPATH} \
	    PYTEST_ADDOPTS="$$cost_opts" $(MAKE) --no-print-directory integration INTEGRATION_LAB1_THEN=molecule || stage_failed=1 ;; \
	  *) $(MAKE) --no-print-directory $$stage || stage_failed=1 ;; \
	  esac; \
	  echo "$$stage $$s $$(date +%s.%N)" >> $(COST_DIR)/stages.tsv; \
	  if [ -n "$$stage_failed" ]; then echo "make test: $$stage failed after $$(( $$(date +%s) - $${s%.*} )) s"; exit 1; fi; \
	  rows="$$rows$$(printf '%-20s %5d s' $$stage $$(( $$(date +%s) - $${s%.*} )))\n"; done; \
	sleep 1.5; kill $$sampler 2>/dev/null || true; \
	printf '\nmake test: every stage passed\n%b%-20s %5d s\n\n' "$$rows" total $$(( $$(date +%s) - t0 )); \
	$(BIN)/python benchmarks/test_cost.py stages $(COST_DIR)/timeline.jsonl $(COST_DIR)/stages.tsv \
	  --modules $$cost_dir --budget tests/cost_budget.yml

# The hash locks of the nodes' offline virtualenvs (role node_venv installs them), one per role
# in NODE_REQUIREMENTS: pip download from PyPI of the role's pins (_<role>_requirements and
# _<role>_pip_version in roles/<role>/vars/main.yml) for every supported node platform, then
# each wheel's sha256, into roles/<role>/files/requirements-node.txt. Run it after changing
# the pins, and commit the result; `make node-requirements NODE_REQUIREMENTS=vllm_nvfp4` makes one.
# NODE_LOCK_PURPOSE_<role>: what the lock holds, its first line.
NODE_REQUIREMENTS ?= hf_weights vllm_nvfp4
NODE_LOCK_PURPOSE_hf_weights := the Hugging Face client for the nodes
NODE_LOCK_PURPOSE_vllm_nvfp4 := the Docker API client for the nodes (requests, for community.docker)
node-requirements: setup
	$(foreach role,$(NODE_REQUIREMENTS),PYTHONPATH=$(abspath .collections) \
	  python -m ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse \
	  --vars roles/$(role)/vars/main.yml --out roles/$(role)/files/requirements-node.txt \
	  --purpose "$(NODE_LOCK_PURPOSE_$(role))";)

# README.md's "Site variables" table is rendered from the site contract, never edited by
# hand; tests/unit/test_site_contract.py fails when it is stale. Run after changing
# meta/site_argument_spec.yml, and commit both.
site-vars: setup
	PYTHONPATH=$(abspath .collections) python -m ansible_collections.dgx_spark.glm53.plugins.plugin_utils._site_spec \
	  --readme README.md

clean:
	rm -rf .build

# --- The Spark lab (lab/README.md): simulated Sparks in containers on this machine, two
# unless NODES=N (or GLM53_LAB_NODES) says otherwise.
# lab/spark_lab.py needs only the standard library and root (it installs docker.io and
# debootstrap and starts dockerd when missing), so these targets do not need `setup`.
LAB_TOOL := $(PYTHON) lab/spark_lab.py
LAB_NODES := $(if $(NODES),--nodes $(NODES))

lab-up:
	$(LAB_TOOL) up $(LAB_NODES)

# Lab 1, then every lab of EXTRA_LABS side by side: each copies lab 1's node image into an engine
# of its own and starts its own nodes, hub and git daemon; one after the other, lab 4 came up
# 44 s after sanity had ended, and make test waited for it.
labs-up:
	$(MAKE) --no-print-directory lab-up
	mkdir -p .build; pids=""; for n in $(EXTRA_LABS); do \
	  $(LAB_TOOL) --lab $$n up > .build/lab$$n-up.log 2>&1 & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	for n in $(EXTRA_LABS); do cat .build/lab$$n-up.log; done; exit $$rc

lab-down:
	$(LAB_TOOL) down
	for n in 2 3 4; do if [ -e /run/netns/glm53-lab-$$n ]; then $(LAB_TOOL) --lab $$n down; fi; done

lab-status:
	$(LAB_TOOL) status $(LAB_NODES)

# Operator rehearsal on the lab: the README's main job. Brings the lab up, adds the nvidia
# runtime as `admin` with become (the lab's nodes start without it, unlike stock DGX OS),
# deploys path=tensorfold with playbooks/site.yml as `spark` (preflight, Docker, weights
# from the lab hub, the kit and the C8 profile with lp9001, 8 slots), then shows the
# endpoint, the slot count and one streamed chat completion from the head. Idempotent: a
# second run reports changed=0 for both playbooks.
lab: setup lab-up
	@inventory=$$($(LAB_TOOL) inventory $(LAB_NODES)); \
	ansible-playbook -i $$inventory playbooks/docker_runtime.yml -e ansible_user=admin -e docker_runtime_user=spark -b && \
	ansible-playbook -i $$inventory playbooks/site.yml -e path=tensorfold
	bash lab/demo.sh

# End-to-end tests on the lab (the `lab` fixture brings it up), in four sessions side by side:
# the modules in LAB<n>_TESTS on lab n for each n in EXTRA_LABS (the same lab again, each in a
# network namespace and Docker engine of its own: lab/sparklab/netns.py), the rest on lab 1.
# They wait on Ansible, SSH, the simulated engines and the watchdog's ticks far more than on
# the CPU, so running them side by side divides the time. INTEGRATION_LABS=1 runs them all on
# lab 1. pytest exits 5 when it collects nothing, which fails this target as it should. Every test's time is kept in .build/integration*.xml
# (benchmarks/test_times.py reads them: where the time goes).
INTEGRATION_LABS ?= 4
# A make target run on lab 1 once its session passed, while the other labs finish theirs (make
# test: molecule, whose scenario deploys on lab 1 and takes it down at the end). The other labs
# have their own network namespace, Docker engine, hub and state, so nothing of theirs is
# touched; after the first session ended the two cores had been half idle for minutes. With
# INTEGRATION_LABS=1 it runs after the one session, so make test never drops it.
INTEGRATION_LAB1_THEN ?=
# A module starts from the lab's baseline (no container, no contract) but keeps the images,
# weights and virtualenvs an earlier module on the same lab made, so modules that deploy the
# same path share a lab: lab 1 runs path tensorfold (test_tensorfold), the weights' mirror and
# the small modules, then molecule; lab 2 the preflight, the weights and the four-node lab
# (which deploys path vllm on four nodes); lab 3 the watchdog, whose ticks are mostly waiting,
# and the lab's own fault helpers; lab 4 path vllm (test_vllm, whose one deployment the
# watchdog's tests on that path use too), then docker_runtime (a fault per case, no deployment).
# With three sessions lab 3 (watchdog and vllm) ran alone for the last minutes and all three
# waited at once for two: a fourth divides the waits, not the CPU (benchmarks/test_cost.py on
# make test: the cores' busy share by minute). docker_runtime ran on lab 1 until a fresh clone
# of 47462d8 showed lab 4 done at 649 s and lab 1 at 934 s (150 s of it docker_runtime's), its
# end and molecule's then alone on half-idle cores; with it on lab 4 the four sessions end within about two
# minutes of each other (fresh clone of b625353: lab stage 1002 -> 894 s).
EXTRA_LABS := 2 3 4
LAB2_TESTS := $(addprefix tests/integration/,test_cx7_link.py test_cx7_link_hardening.py test_four_nodes.py \
  test_hf_weights.py)
LAB3_TESTS := $(addprefix tests/integration/,test_watchdog.py test_lab.py)
LAB4_TESTS := $(addprefix tests/integration/,test_vllm.py test_docker_runtime.py)
integration: setup
	mkdir -p .build; \
	if [ "$(INTEGRATION_LABS)" = 1 ]; then python -m pytest -m lab tests/integration --junitxml=.build/integration.xml; \
	  $(if $(INTEGRATION_LAB1_THEN),$(MAKE) --no-print-directory $(INTEGRATION_LAB1_THEN);) exit 0; fi; \
	for n in $(EXTRA_LABS); do $(LAB_TOOL) --lab $$n up > .build/lab$$n-up.log 2>&1 || { cat .build/lab$$n-up.log; exit 1; }; done; \
	$(foreach n,$(EXTRA_LABS),$(LAB_TOOL) --lab $(n) run -- python -m pytest -p no:cacheprovider -m lab $(LAB$(n)_TESTS) \
	  --junitxml=.build/integration-lab$(n).xml > .build/integration-lab$(n).log 2>&1 & pid$(n)=$$!;) \
	one=0; python -m pytest -m lab tests/integration $(addprefix --ignore=,$(foreach n,$(EXTRA_LABS),$(LAB$(n)_TESTS))) \
	  --junitxml=.build/integration.xml || one=$$?; \
	if [ -n "$(INTEGRATION_LAB1_THEN)" ] && [ $$one = 0 ]; then \
	  $(MAKE) --no-print-directory $(INTEGRATION_LAB1_THEN) || one=$$?; fi; \
	others=0; $(foreach n,$(EXTRA_LABS),rc=0; wait $$pid$(n) || rc=$$?; \
	  echo "--- lab $(n)'s session ($(LAB_TOOL) --lab $(n)): exit $$rc ---"; cat .build/integration-lab$(n).log; \
	  [ $$rc = 0 ] || others=1;) \
	exit $$(( one || others ))

# Every scenario in molecule/; the shared lab is created once and destroyed once.
# Fresh molecule state each time: molecule skips `create` when its state file says
# "created", even after a `make lab-down`; lab-up is cheap when the lab is up.
MOLECULE_STATE := $(abspath tests/output/molecule)
molecule: setup
	rm -rf $(MOLECULE_STATE)
	MOLECULE_EPHEMERAL_DIRECTORY=$(MOLECULE_STATE) molecule test --all
