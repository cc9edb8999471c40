# Topogov — every entry point a newcomer needs. Each target installs what it needs first.
SHELL   := /bin/bash
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PIP     := $(BIN)/pip --disable-pip-version-check -q
# The stamp changes whenever a pin changes, so `make` reinstalls exactly when needed.
STAMP   := $(VENV)/.installed-$(shell cat requirements/*.txt pyproject.toml cli/pyproject.toml local/pyproject.toml 2>/dev/null | sha1sum | cut -c1-12)

.PHONY: help install kubectl controlplane local test unit integration lint bench hardening clean openapi synth
.PHONY: checks-tools hyp-tools bench-coldstart rehearse deploy-tools chromium dashboard screenshots

help:
	@echo "make screenshots - a screenshot of each dashboard page into docs/ (a local stack, headless chromium)"
	@echo "make local   - the local stack (AWS on moto, Kubernetes + Kueue built from source, the API) and a walkthrough"
	@echo "make test    - lint + every test suite (what .ci/run runs)"
	@echo "make bench   - reconcile benchmark at 100, 1,000 and 10,000 nodes"
	@echo "make hardening - fuzzing, auth matrix, races and fault injection at full size, with a report"
	@echo "make rehearse - cdk bootstrap/deploy/upgrade/destroy against the local AWS emulator, least privilege observed"
	@echo "make deploy-tools - what a deploy needs (the CDK app, the topogov command, the CDK CLI); no Go"

# Three distributions (docs/architecture.md): the service (.), the CLI (cli/), the local stack (local/).
$(STAMP): requirements/*.txt pyproject.toml cli/pyproject.toml local/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements/dev.txt 2> >(grep -v "is ignored: it is neither" >&2)
	$(PIP) install --no-deps --no-build-isolation -e . -e local 2> >(grep -v "is ignored: it is neither" >&2)
	@# the CLI last: it owns the `topogov` command (an older service install that declared it too
	@# removes it when reinstalled)
	$(PIP) install --no-deps --no-build-isolation -e cli 2> >(grep -v "is ignored: it is neither" >&2)
	@rm -f $(VENV)/.installed-*; touch $@

install: $(STAMP) kubectl node_modules/.installed dashboard controlplane checks-tools hyp-tools chromium

# What a deploy needs and no more (docs/deploying.md): the CDK app and the topogov command in .venv,
# and the CDK CLI; no Go, no local cluster, no kubectl (yours talks to your cluster). `make install`
# later adds the rest to the same .venv.
DEPLOY_STAMP := $(VENV)/.deploy-$(shell cat requirements/runtime.txt requirements/cli.txt requirements/infra.txt requirements/deploy.txt pyproject.toml cli/pyproject.toml 2>/dev/null | sha1sum | cut -c1-12)
$(DEPLOY_STAMP): requirements/runtime.txt requirements/cli.txt requirements/infra.txt requirements/deploy.txt pyproject.toml cli/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# --no-compile: pip would compile every module of aws-cdk-lib's bindings (28 of the install's 41
	@# CPU-seconds); the first synth compiles the few it imports (5 s), once
	$(PIP) install --no-compile -r requirements/deploy.txt
	$(PIP) install --no-deps --no-build-isolation -e . -e cli 2> >(grep -v "is ignored: it is neither" >&2)
	@rm -f $(VENV)/.deploy-*; touch $@

deploy-tools: $(DEPLOY_STAMP) node_modules/.installed dashboard

# cfn-lint and checkov (tests/infra/test_template_checks.py runs them on the synthesized template), in
# a virtual environment of their own: checkov pins a boto3 that runtime.txt's cannot live beside.
CHECKS       := $(VENV)/checks
CHECKS_STAMP := $(CHECKS)/.installed-$(shell sha1sum requirements/checks.txt 2>/dev/null | cut -c1-12)
$(CHECKS_STAMP): requirements/checks.txt
	@test -x $(CHECKS)/bin/python || $(PYTHON) -m venv $(CHECKS)
	$(CHECKS)/bin/pip --disable-pip-version-check -q install -r requirements/checks.txt
	@rm -f $(CHECKS)/.installed-*; touch $@

checks-tools: $(CHECKS_STAMP)

# AWS's HyperPod CLI, `hyp` (sagemaker-hyperpod, unmodified), in a virtual environment of its own: it
# pins click, requests and pytest exactly, beside which dev.txt's cannot live. The --hyperpod stack's
# tests and walkthrough run it against the local cluster (docs/hyperpod.md, "hyp against the local stack").
HYP       := $(VENV)/hyp
HYP_STAMP := $(HYP)/.installed-$(shell sha1sum requirements/hyp.txt 2>/dev/null | cut -c1-12)
$(HYP_STAMP): requirements/hyp.txt
	@test -x $(HYP)/bin/python || $(PYTHON) -m venv $(HYP)
	$(HYP)/bin/pip --disable-pip-version-check -q install -r requirements/hyp.txt
	@rm -f $(HYP)/.installed-*; touch $@

hyp-tools: $(HYP_STAMP)

# The local cluster: etcd, Kubernetes v1.35.4 (apiserver, controller manager, scheduler, kubectl),
# Kueue v0.17.0, KWOK v0.8.0, JobSet v0.11.1 and the Kubeflow training operator v1.9.3, built from
# the Go modules pinned in local/controlplane/ into
# ~/.cache/topogov (or $$TOPOGOV_CACHE) on first use, again only when a pin changes. Needs Go 1.26.
controlplane: $(STAMP)
	@command -v go >/dev/null 2>&1 || { echo "make: the local cluster is built from Go modules: install Go 1.26 (https://go.dev/dl)" >&2; exit 2; }
	@$(BIN)/python -m topogov_local.cluster.build >/dev/null

# The CDK CLI, pinned in package.json / package-lock.json (`npx cdk synth` works offline).
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	@touch $@

# The dashboard's page (`topogov dashboard`): cli/dashboard-web/ bundled with esbuild, Apache ECharts
# inside, into the CLI package's static/ (package data; not in git). Offline: npm ci brought both.
DASHBOARD := cli/topogov_cli/dashboard/static/app.js
$(DASHBOARD): node_modules/.installed $(wildcard cli/dashboard-web/*.mjs cli/dashboard-web/src/*)
	npm run --silent build:dashboard

dashboard: $(DASHBOARD)

# The browser tests and `make screenshots` drive Debian's `chromium` with Playwright (no browser
# download): installed where apt is, like kubectl; elsewhere those tests are skipped, saying why.
chromium:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package chromium) for the dashboard's browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# A screenshot of each dashboard page (docs/dashboard-*.png) against a local stack with jobs running.
screenshots: install
	$(BIN)/python -m topogov_local.screenshots docs

# kubectl is Debian's `kubernetes-client`; the tests and the walkthrough drive the real binary.
kubectl:
	@command -v kubectl >/dev/null 2>&1 || { \
	  echo "installing kubectl (Debian package kubernetes-client)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client >/dev/null; }

local: install
	$(BIN)/topogov local

local-hyperpod: install  # the local stack as a SageMaker HyperPod cluster (docs/hyperpod.md)
	$(BIN)/topogov local --hyperpod

# mypy's cache is the machine's, beside the cluster's binaries: a fresh clone (CI's) checks its files
# against it (a file whose path or time changed is compared by its hash) instead of type-checking
# the venv's packages from nothing (77 CPU-seconds for the two runs)
MYPY := $(BIN)/mypy --cache-dir $(or $(TOPOGOV_CACHE),$(HOME)/.cache/topogov)/mypy

lint: install
	$(BIN)/ruff check lambdas cli local infra tests app.py
	$(BIN)/ruff format --check lambdas cli local infra tests app.py
	$(BIN)/lint-imports --no-cache           # the dependency rules of docs/architecture.md
	$(MYPY) -p topogov -p topogov_cli -p topogov_local
	$(MYPY) infra app.py

unit: install
	$(BIN)/pytest tests/unit

integration: install
	$(BIN)/pytest tests/integration

test: lint
	$(BIN)/pytest -n 2 --dist loadfile --no-loadscope-reorder

# The cluster has no default: `make synth CLUSTER=my-eks` (cdk.json names none on purpose).
synth: install
	@test -n "$(CLUSTER)" || { echo "make synth: name the EKS cluster: make synth CLUSTER=my-eks" >&2; exit 2; }
	npx cdk synth --quiet -c topogov:clusterName=$(CLUSTER)

bench: install
	$(BIN)/topogov bench reconcile --nodes 100 --nodes 1000 --nodes 10000
	$(BIN)/topogov bench governor --nodes 100 --nodes 1000 --nodes 10000
	$(BIN)/topogov bench placement --nodes 1000 --nodes 10000
	$(BIN)/topogov bench policies
	$(BIN)/topogov bench simulate
	$(BIN)/topogov bench estimate
	$(BIN)/topogov bench kueue-perf
	$(BIN)/topogov bench dashboard --nodes 10000

# Cold start before/after pruning the layer and with SnapStart (needs PyPI, or TOPOGOV_WHEELHOUSE).
bench-coldstart: install
	$(BIN)/topogov bench coldstart

# The hardening suites at report size (make test runs them bounded); prints the report at the end.
hardening: install
	TOPOGOV_HARDENING=full $(BIN)/pytest tests/hardening -p no:xdist -p no:cacheprovider -q -rN

# `cdk deploy` rehearsed with the real CDK CLI against the local AWS emulator (no AWS account): the
# deployed stack checked through each service's API, the handlers under their deployed roles with IAM
# enforced (and RBAC, from the API server's audit log), an upgrade, `cdk destroy`. make test runs it
# bounded; here at full size, printing the report (also in .topogov/rehearse/report.json).
rehearse: install
	TOPOGOV_REHEARSE=full $(BIN)/pytest tests/rehearse -p no:xdist -p no:cacheprovider -q -rN

clean:
	rm -rf $(VENV) .topogov .pytest_cache .ruff_cache .hypothesis

# The OpenAPI document is generated from the code and committed; tests fail when they differ.
openapi: install
	$(BIN)/python -c "from topogov.handlers.api import openapi_document; import sys; sys.stdout.write(openapi_document())" > docs/openapi.json
