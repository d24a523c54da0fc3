# gpustack-render: `make help` lists the targets.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) ## create .venv and install the project with its dev tools

demo: setup ## render the bundled example (examples/qwen-chat.yaml)
	$(BIN)/gpustack-render render examples/qwen-chat.yaml

envtest: ## build (or reuse) the simulated cluster's components (kube-*, etcd, Kueue, KWOK, metrics-server, kubectl, helm, yaml2json; KEDA's CRDs)
	bash hack/envtest/build.sh >/dev/null

cluster: setup envtest ## start a simulated GPU cluster in the background (kubeconfig: .cluster/kubeconfig)
	$(BIN)/python hack/cluster.py up

cluster-demo: setup ## apply examples/ on the running simulated cluster and wait until each is Ready
	$(BIN)/python hack/cluster.py demo

cluster-down: ## stop the simulated cluster (every process it started) and remove .cluster/
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY)) hack/cluster.py down

test: setup envtest ## run the whole test suite (unit, golden, property, integration)
	$(BIN)/pytest

test-unit: setup ## run the tests that need no API server
	$(BIN)/pytest -m "not integration"

fmt: setup ## format the code
	$(BIN)/ruff format gpustack_render gpustack_kube gpustack_controller gpustack_webhook gpustack_modelmanager tests hack bench
	$(BIN)/ruff check --fix gpustack_render gpustack_kube gpustack_controller gpustack_webhook gpustack_modelmanager tests hack bench

lint: setup ## ruff (lint and format), mypy --strict and the import contracts
	$(BIN)/ruff check gpustack_render gpustack_kube gpustack_controller gpustack_webhook gpustack_modelmanager tests hack bench
	$(BIN)/ruff format --check gpustack_render gpustack_kube gpustack_controller gpustack_webhook gpustack_modelmanager tests hack bench
	$(BIN)/mypy
	$(BIN)/lint-imports

crds: setup ## regenerate deploy/crds/ from the models
	$(BIN)/python hack/update-crds.py deploy/crds

docs: setup ## regenerate docs/api.md from the models and docs/explain.schema.json
	$(BIN)/python hack/update-api-docs.py docs/api.md
	$(BIN)/python hack/update-explain-schema.py docs/explain.schema.json

golden-update: setup ## rewrite golden files from the current output, then review the diff
	$(BIN)/pytest tests/test_golden.py --update-golden
	git --no-pager diff --stat -- golden/

ci: lint test ## what CI runs: lint, then every test

verify: crds docs ci ## lint + test + CRD and docs drift + a clean work tree (no untracked files)
	git diff --exit-code
	@untracked="$$(git ls-files --others --exclude-standard)"; \
	if [ -n "$$untracked" ]; then echo "untracked files:"; echo "$$untracked"; exit 1; fi

image: ## build the container image with docker, podman or buildah (says so and exits 0 without one)
	bash hack/image.sh

image-rootfs: setup ## build the same image without a container engine (mmdebstrap + umoci; OCI layout in ~/.cache)
	PYTHON=$(BIN)/python nice bash hack/image/build-rootfs.sh

FUZZ_EXAMPLES ?= 20000

fuzz: setup ## long random fuzz run of the entry points (FUZZ_EXAMPLES per test, default 20000)
	GPUSTACK_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest tests/fuzz -q -p no:cacheprovider \
		--hypothesis-show-statistics

ENGINES_GOLDEN ?= golden

engines-check: setup ## check every golden engine command line with vLLM 0.33.0 and SGLang 0.5.23 themselves (installs them in ~/.cache, ~10 GB each; not in ci)
	$(BIN)/python hack/engines-check.py $(ENGINES_GOLDEN)

bench: setup ## run the benchmarks (figures are ratios against an in-run baseline)
	$(BIN)/python -m bench

.PHONY: help setup demo image image-rootfs envtest cluster cluster-demo cluster-down test test-unit fmt lint crds docs golden-update ci verify bench fuzz engines-check
