# dgx_spark.glm53 - developer and CI entry points.
#   make setup   create .venv and install the pinned toolchain (fast when already done)
#   make test    everything CI runs: lint, sanity, unit tests, lab end-to-end, molecule
#   make lab     deploy onto the two-node Spark lab (see lab/README.md)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(abspath $(VENV))/bin
STAMP  := $(VENV)/.installed
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(abspath ansible.cfg)
# The collection is found by FQCN through the committed .collections symlink.
COLL_DIR := .collections/ansible_collections/dgx_spark/glm53
SANITY_ROOT := .build/sanity/ansible_collections/dgx_spark/glm53

.PHONY: help setup lint sanity unit test build doc clean

help:
	@grep -E '^#   make' $(MAKEFILE_LIST) | sed 's/^#   //'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

setup: $(STAMP)

lint: setup
	yamllint -s .
	ansible-lint --profile production

# ansible-test insists on running inside ansible_collections/<ns>/<name>; give it a
# clean copy of the tracked tree (the .collections symlink would recurse).
sanity: setup
	rm -rf .build/sanity && mkdir -p $(SANITY_ROOT)
	git ls-files -z --cached --others --exclude-standard | grep -zv '^\.collections/' \
	  | rsync -a --from0 --files-from=- ./ $(SANITY_ROOT)/
	cd $(SANITY_ROOT) && ansible-test sanity --venv --python 3.11 --color no

unit: setup
	python -m pytest tests/unit

build: setup
	mkdir -p .build && ansible-galaxy collection build --force --output-path .build .

doc: setup
	ansible-doc dgx_spark.glm53.page_cache_evict

test: setup lint sanity unit

clean:
	rm -rf .build
