# dgx_spark.glm53 - developer and CI entry points.
#   make lab          rehearse a deployment on the Spark lab (lab/README.md; NODES=4 for four nodes)
#   make test         everything CI runs: lint, sanity, unit, build, lab end-to-end, molecule
#   make setup        create .venv and install the pinned toolchain (fast when already done)
#   make lint         yamllint + ansible-lint (production profile)
#   make sanity       ansible-test sanity on a copy laid out as ansible_collections/dgx_spark/glm53
#   make unit         pytest tests/unit (real page cache, pure functions)
#   make build        build the collection tarball and prove it installs alone
#   make node-requirements  regenerate roles/hf_weights/files/requirements-node.txt (hash lock; needs PyPI)
#   make integration  end-to-end tests on the lab through ansible-runner
#   make molecule     every molecule scenario on the lab
#   make lab-up | lab-down | lab-status   (lab-up/lab-status/lab take NODES=N, default $GLM53_LAB_NODES or 2)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(abspath $(VENV))/bin
STAMP  := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)
SANITY_ROOT := .build/sanity/ansible_collections/dgx_spark/glm53
# ansible-test fetches a pip bootstrap script from a host we cannot reach; put our
# stand-in (tests/sanity/get_pip.py) where it looks first. 24.2 is ansible-core 2.19's pin.
GET_PIP_CACHE := $(HOME)/.ansible/test/cache/get_pip_24_2.py

.PHONY: help setup lint sanity unit test build clean lab-up lab-down lab-status lab integration molecule node-requirements

help:
	@grep -E '^#   make' $(MAKEFILE_LIST) | sed 's/^#   //'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# Tools the unit tests drive for real: rsync (hf_mirror) and fincore (util-linux, the page
# cache oracle). Installed with apt when missing (CI runs as root on a fresh machine).
TOOLS_STAMP := $(VENV)/.tools
$(TOOLS_STAMP):
	@missing=""; command -v rsync >/dev/null || missing="$$missing rsync"; \
	command -v fincore >/dev/null || missing="$$missing util-linux"; \
	if [ -n "$$missing" ]; then echo "installing$$missing with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi
	mkdir -p $(VENV) && touch $@

setup: $(STAMP) $(TOOLS_STAMP)

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

unit: setup
	python -m pytest tests/unit

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

test: setup lint sanity unit build integration molecule

# The hash lock of the nodes' Hugging Face client (role hf_weights): pip download from PyPI of
# the role's pins for every supported node platform, then each wheel's sha256. Run it after
# changing _hf_weights_requirements or _hf_weights_pip_version, and commit the result.
NODE_REQUIREMENTS := roles/hf_weights/files/requirements-node.txt
node-requirements: setup
	PYTHONPATH=$(abspath .collections) python -m ansible_collections.dgx_spark.glm53.plugins.plugin_utils._wheelhouse \
	  --vars roles/hf_weights/vars/main.yml --out $(NODE_REQUIREMENTS)

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

lab-down:
	$(LAB_TOOL) down

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

# End-to-end tests on the lab (the `lab` fixture brings it up). pytest exits 5 when it
# collects nothing, which fails this target as it should.
integration: setup
	python -m pytest -m lab tests/integration

# Every scenario in molecule/; the shared lab is created once and destroyed once.
# Fresh molecule state each time: molecule skips `create` when its state file says
# "created", even after a `make lab-down`; lab-up is cheap when the lab is up.
MOLECULE_STATE := $(abspath tests/output/molecule)
molecule: setup
	rm -rf $(MOLECULE_STATE)
	MOLECULE_EPHEMERAL_DIRECTORY=$(MOLECULE_STATE) molecule test --all
