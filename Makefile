# The two commands are `make run` and `make test`; both run `make setup` first.
# Everything is installed here, from the pinned lock and the poms under include/,
# so a fresh clone on a machine with Python 3.11, a JDK 17 and Maven needs nothing else.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JVM_DIR := .cache/jvm
BROWSER_STAMP := .cache/browser/.installed
POSTGRES_STAMP := .cache/postgres/.installed
JEMALLOC_STAMP := .cache/jemalloc/.installed
PROMETHEUS_STAMP := .cache/prometheus/.installed
RUST_LINT_STAMP := .cache/rust/.lint-tools
DATA_DOCS_ASSETS := .cache/vendor/data-docs
MVN := mvn -B -q -Dstyle.color=never -s include/jvm/settings.xml
UV_VERSION := $(shell sed -n 's/^uv==//p' requirements.lock)

# Artifacts the Spark wheel already ships; the connector folder keeps only what Spark lacks.
SPARK_PROVIDED := scala-library,lz4-java,snappy-java,slf4j-api,spark-tags_2.13,scala-parallel-collections_2.13,jsr305

# The Kubernetes control plane (etcd, kube-apiserver) and helm for the Helm chart's tests
# (tests/helpers/kube.py, tests/integration/deploy/test_helm_chart.py), and the single
# node that runs the chart's Pods (kube-controller-manager, kube-scheduler, kubelet, the
# sandbox's pause binary: tests/helpers/kube_node.py, test_kube_node.py), built with
# `go build` from the pinned module tools/k8s/ into .cache/k8s/bin/. Each stamp holds the
# binary's version and depends on the module's files, so a second `make setup` does
# nothing and a change to go.mod or go.sum rebuilds. Go's build cache (~/.cache/go-build)
# outlives the clone: the first kube-apiserver build takes minutes, a later clone only links.
# `go` from PATH (any Go >= 1.21 fetches the toolchain go.mod asks for); with none on
# PATH, the pinned toolchain is fetched from the Go module proxy (golang.org/toolchain).
K8S_DIR := .cache/k8s
K8S_BIN := $(K8S_DIR)/bin
K8S_MODULE := tools/k8s/go.mod tools/k8s/go.sum tools/k8s/tools.go
# The node's components (tests/helpers/kube_node.py): the same module's controller manager,
# scheduler and kubelet.
K8S_NODE_BINARIES := kube-controller-manager kube-scheduler kubelet
K8S_STAMPS := $(K8S_DIR)/.etcd $(K8S_DIR)/.kube-apiserver $(K8S_DIR)/.helm \
	$(K8S_NODE_BINARIES:%=$(K8S_DIR)/.%) $(K8S_DIR)/.pause $(K8S_DIR)/.node-runtime
K8S_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes v||p' tools/k8s/go.mod)
HELM_VERSION := $(shell sed -n 's|^[[:space:]]*helm.sh/helm/v3 v||p' tools/k8s/go.mod)
GO_TOOLCHAIN := go1.26.8
GO := $(or $(shell command -v go),$(abspath $(K8S_DIR))/go/bin/go)
K8S_GO_BUILD := cd tools/k8s && $(GO) build -trimpath -buildvcs=false
# The version the binaries report (`kube-apiserver --version`, GET /version, `helm version`)
# and the Kubernetes version `helm template` and `helm lint` assume, as their own builds set.
K8S_VERSION_PKG := k8s.io/component-base/version
K8S_LDFLAGS := -s -w -X $(K8S_VERSION_PKG).gitVersion=v$(K8S_VERSION) \
	-X $(K8S_VERSION_PKG).gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X $(K8S_VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) \
	-X $(K8S_VERSION_PKG).gitTreeState=clean
HELM_LDFLAGS := -s -w -X helm.sh/helm/v3/internal/version.version=v$(HELM_VERSION) \
	$(foreach pkg,pkg/chartutil pkg/lint/rules,\
	-X helm.sh/helm/v3/$(pkg).k8sVersionMajor=$(word 1,$(subst ., ,$(K8S_VERSION))) \
	-X helm.sh/helm/v3/$(pkg).k8sVersionMinor=$(word 2,$(subst ., ,$(K8S_VERSION))))

.PHONY: help setup run test lint format lock clean docs

help:
	@echo "make run    - set up, then run the whole system: clusters, replicator, demo, Airflow (Ctrl-C stops)"
	@echo "make test   - set up, then run every test (unit and integration, real brokers)"
	@echo "make setup  - idempotent: .venv from requirements.lock, Kafka/Spark jars from Maven Central"
	@echo "make lint   - ruff, mypy, helm lint --strict, promtool check/test rules; cargo fmt --check and clippy"
	@echo "make format - ruff format and ruff check --fix"
	@echo "make lock   - re-resolve requirements.in into requirements.lock"
	@echo "make clean  - stop local clusters, delete .venv, .cache and .data"
	@echo "make image  - the container images (full, engine, PostgreSQL's), on a base built here"
	@echo "make compose-up / compose-down - the whole system in docker-compose (.env made if absent)"

setup: $(VENV)/.installed $(JVM_DIR)/kafka/.resolved $(JVM_DIR)/kafka.jsa $(JVM_DIR)/spark-kafka/.resolved \
	$(JVM_DIR)/spark-verify.jsa \
	$(BROWSER_STAMP) $(POSTGRES_STAMP) $(PROMETHEUS_STAMP) $(JEMALLOC_STAMP) $(DATA_DOCS_ASSETS)/.installed \
	$(K8S_STAMPS) $(RUST_LINT_STAMP)

# Bytecode is compiled at install (uv writes none by default): with PYTHONDONTWRITEBYTECODE
# set, as here, every process would otherwise compile all it imports (Airflow, pyspark, GX)
# from source, every time; the GX step of one verification took 28 CPU-s instead of 14.
# setup.py and the data plane's crate (dataplane/, built in place by setuptools-rust when
# cargo is on PATH; cargo's target directory, ~/.cache/replicator/cargo-target, outlives the
# clone).
$(VENV)/.installed: requirements.lock pyproject.toml setup.py lab/pyproject.toml \
	$(wildcard dataplane/Cargo.toml dataplane/Cargo.lock dataplane/src/*.rs)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync -q --compile-bytecode --python $(BIN)/python requirements.lock
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python --no-deps -e .
	# The lab (the local stack, `replicator stack`): beside the product, not in its wheel.
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python --no-deps -e lab
	touch $@

# rustfmt and clippy for `make lint`, on the toolchain of the cargo on PATH (the one
# setup.py builds the data plane with): rustup adds them where it manages that toolchain
# (its minimal profile has neither). The stamp records their versions, so a second run
# does nothing; with no cargo on PATH there is no crate to check and no stamp is written.
$(RUST_LINT_STAMP):
	@if ! command -v cargo >/dev/null; then echo "cargo is not on PATH: no Rust lint tools to set up"; exit 0; fi; \
	if ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then \
		command -v rustup >/dev/null || { echo "cargo fmt or cargo clippy is missing and rustup is not here to add them: install rustfmt and clippy for $$(cargo --version)" >&2; exit 1; }; \
		(cd dataplane && rustup component add rustfmt clippy) || exit 1; \
	fi; \
	mkdir -p $(dir $@); \
	(cd dataplane && cargo fmt --version && cargo clippy --version) | tee $@.tmp; \
	test -s $@.tmp && mv $@.tmp $@

$(JVM_DIR)/kafka/.resolved: include/jvm/kafka/pom.xml include/jvm/settings.xml
	rm -rf $(JVM_DIR)/kafka $(JVM_DIR)/kafka.jsa
	$(MVN) -f include/jvm/kafka/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=$(abspath $(JVM_DIR)/kafka)
	touch $@

# The Kafka JVMs' class-data archive: a throwaway broker started once writes the classes
# it loaded, and every local broker and storage tool maps them from it (about 40% less
# CPU to start one; lab/replicator_lab/class_archive.py).
$(JVM_DIR)/kafka.jsa: $(JVM_DIR)/kafka/.resolved | $(VENV)/.installed
	$(BIN)/python -m replicator_lab.class_archive

$(JVM_DIR)/spark-kafka/.resolved: include/jvm/spark-kafka/pom.xml include/jvm/settings.xml
	rm -rf $(JVM_DIR)/spark-kafka
	$(MVN) -f include/jvm/spark-kafka/pom.xml dependency:copy-dependencies \
		-DincludeScope=runtime -DexcludeArtifactIds=$(SPARK_PROVIDED) \
		-DoutputDirectory=$(abspath $(JVM_DIR)/spark-kafka)
	touch $@

# The verification job's driver class-data archive: a small local job run once over a
# throwaway broker writes the classes its JVM loaded, and every later local job maps them
# (about 3 s less a job; replicator/verification/driver_jvm.py). Made again when PySpark
# or the connector's jars change.
$(JVM_DIR)/spark-verify.jsa: $(JVM_DIR)/spark-kafka/.resolved $(JVM_DIR)/kafka.jsa $(VENV)/.installed
	rm -f $@
	$(BIN)/python -m replicator_lab.class_archive spark

# Headless Chromium and its WebDriver from Debian, for the end-to-end browser test
# (tests/integration/airflow/test_browser.py). The stamp records the installed version, so a second run
# does nothing; the package index is refreshed only when the install fails without it.
$(BROWSER_STAMP):
	@if ! { test -x /usr/bin/chromium && test -x /usr/bin/chromedriver; }; then \
		packages="chromium chromium-driver"; \
		apt="env DEBIAN_FRONTEND=noninteractive apt-get"; \
		if [ "$$(id -u)" != 0 ]; then apt="sudo $$apt"; fi; \
		$$apt install -y -q --no-install-recommends $$packages \
			|| { $$apt update -q && $$apt install -y -q --no-install-recommends $$packages; }; \
	fi
	@mkdir -p $(dir $@)
	/usr/bin/chromium --version 2>/dev/null | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# PostgreSQL server binaries from Debian, for the state store's tests on PostgreSQL
# (tests/helpers/postgres.py starts a server of its own under .data/; no service is
# enabled or started). Same pattern as the browser: the stamp records the version.
$(POSTGRES_STAMP):
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		packages="postgresql"; \
		apt="env DEBIAN_FRONTEND=noninteractive apt-get"; \
		if [ "$$(id -u)" != 0 ]; then apt="sudo $$apt"; fi; \
		$$apt install -y -q --no-install-recommends $$packages \
			|| { $$apt update -q && $$apt install -y -q --no-install-recommends $$packages; }; \
	fi
	@mkdir -p $(dir $@)
	$$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1) --version | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# jemalloc from Debian: `replicator run` re-executes itself with it preloaded
# (replicator/allocator.py; the compiled data path spends a third of its CPU in glibc's
# malloc otherwise), so the tests' worker processes and `make run` use what production
# does. Same pattern as the browser: the stamp records the package's version.
$(JEMALLOC_STAMP):
	@if ! /sbin/ldconfig -p | grep -q 'libjemalloc\.so\.2 '; then \
		packages="libjemalloc2"; \
		apt="env DEBIAN_FRONTEND=noninteractive apt-get"; \
		if [ "$$(id -u)" != 0 ]; then apt="sudo $$apt"; fi; \
		$$apt install -y -q --no-install-recommends $$packages \
			|| { $$apt update -q && $$apt install -y -q --no-install-recommends $$packages; }; \
	fi
	@mkdir -p $(dir $@)
	dpkg-query -W -f '$${Package} $${Version}\n' libjemalloc2 | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# Prometheus from Debian: `promtool` checks and tests the alert rules of deploy/monitoring/
# (tests/unit/monitoring/), and the `prometheus` server scrapes the engine in the
# monitoring screenshot (tests/integration/monitoring/). No service is enabled or
# started. Same pattern as the browser: the stamp records the version.
$(PROMETHEUS_STAMP):
	@if ! { test -x /usr/bin/promtool && test -x /usr/bin/prometheus; }; then \
		packages="prometheus"; \
		apt="env DEBIAN_FRONTEND=noninteractive apt-get"; \
		if [ "$$(id -u)" != 0 ]; then apt="sudo $$apt"; fi; \
		$$apt install -y -q --no-install-recommends $$packages \
			|| { $$apt update -q && $$apt install -y -q --no-install-recommends $$packages; }; \
	fi
	@mkdir -p $(dir $@)
	/usr/bin/promtool --version 2>&1 | head -1 | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# The scripts, styles and fonts Great Expectations' Data Docs load from CDNs, pinned in
# include/vendor/data-docs/package-lock.json and installed from the npm registry with
# `npm ci`; the DR status plugin serves them, so Data Docs render with no internet.
$(DATA_DOCS_ASSETS)/.installed: include/vendor/data-docs/package.json \
	include/vendor/data-docs/package-lock.json include/vendor/data-docs/.npmrc
	rm -rf $(DATA_DOCS_ASSETS) && mkdir -p $(DATA_DOCS_ASSETS)
	cp $^ $(DATA_DOCS_ASSETS)/
	cd $(DATA_DOCS_ASSETS) && npm ci -q --ignore-scripts --no-audit --no-fund
	touch $@

$(abspath $(K8S_DIR))/go/bin/go:
	rm -rf $(K8S_DIR)/go $(K8S_DIR)/go.zip && mkdir -p $(K8S_DIR)
	arch=$$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/'); \
	curl -fsSL -o $(K8S_DIR)/go.zip \
		https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$(GO_TOOLCHAIN).linux-$$arch.zip \
	&& $(PYTHON) -m zipfile -e $(K8S_DIR)/go.zip $(K8S_DIR)/go.unzip \
	&& mv $(K8S_DIR)/go.unzip/golang.org/toolchain@*/ $(K8S_DIR)/go
	rm -rf $(K8S_DIR)/go.zip $(K8S_DIR)/go.unzip
	chmod +x $(K8S_DIR)/go/bin/* $(K8S_DIR)/go/pkg/tool/*/*
	$@ version

$(K8S_DIR)/.etcd: $(K8S_MODULE) | $(GO)
	$(K8S_GO_BUILD) -ldflags '-s -w' -o $(abspath $(K8S_BIN))/etcd go.etcd.io/etcd/server/v3
	$(K8S_BIN)/etcd --version | head -1 | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

$(K8S_DIR)/.kube-apiserver: $(K8S_MODULE) | $(GO)
	$(K8S_GO_BUILD) -ldflags '$(K8S_LDFLAGS)' -o $(abspath $(K8S_BIN))/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-apiserver
	$(K8S_BIN)/kube-apiserver --version | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# kube-controller-manager, kube-scheduler and kubelet: the same module, the same version
# stamped in, so the node reports v$(K8S_VERSION) like the API server.
$(K8S_NODE_BINARIES:%=$(K8S_DIR)/.%): $(K8S_DIR)/.%: $(K8S_MODULE) | $(GO)
	$(K8S_GO_BUILD) -ldflags '$(K8S_LDFLAGS)' -o $(abspath $(K8S_BIN))/$* k8s.io/kubernetes/cmd/$*
	$(K8S_BIN)/$* --version | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# The pod sandbox's "pause" process (tools/k8s/pause/): a static binary that sleeps until
# it is told to stop; tests/helpers/oci_image.py packs it into the node's sandbox image
# (no registry of images answers here).
$(K8S_DIR)/.pause: $(K8S_MODULE) tools/k8s/pause/main.go | $(GO)
	cd tools/k8s && CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags '-s -w' \
		-o $(abspath $(K8S_BIN))/pause ./pause
	$(K8S_BIN)/pause --version | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

# The node's container runtime from Debian: containerd (1.6), runc and the CNI plugins
# (bridge, host-local, loopback in /usr/lib/cni). tests/helpers/kube_node.py starts a
# containerd of its own; no service is enabled or started. Same pattern as the browser:
# the stamp records the versions.
$(K8S_DIR)/.node-runtime:
	@if ! { test -x /usr/bin/containerd && command -v runc >/dev/null && test -x /usr/lib/cni/bridge; }; then \
		packages="containerd runc containernetworking-plugins"; \
		apt="env DEBIAN_FRONTEND=noninteractive apt-get"; \
		if [ "$$(id -u)" != 0 ]; then apt="sudo $$apt"; fi; \
		$$apt install -y -q --no-install-recommends $$packages \
			|| { $$apt update -q && $$apt install -y -q --no-install-recommends $$packages; }; \
	fi
	@mkdir -p $(dir $@)
	dpkg-query -W -f '$${Package} $${Version}\n' containerd runc containernetworking-plugins | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

$(K8S_DIR)/.helm: $(K8S_MODULE) | $(GO)
	$(K8S_GO_BUILD) -ldflags '$(HELM_LDFLAGS)' -o $(abspath $(K8S_BIN))/helm helm.sh/helm/v3/cmd/helm
	$(K8S_BIN)/helm version --short | tee $@.tmp
	test -s $@.tmp && mv $@.tmp $@

run: setup
	$(BIN)/replicator stack run $(if $(SECURITY),--security $(SECURITY),--replicate include/config/local.properties) --demo-app demo --airflow

# Two phases: the tests in parallel, then those marked `solo` (the Docker compose stacks);
# both always run, and either failing fails the target. Every test's duration is kept in
# .data/test-artifacts/junit-*.xml (where the suite's time goes).
# - Three workers on two cores: the long files (Airflow, Spark) are CPU-bound, but many
#   others wait on brokers, schedulers and timeouts; with two workers the machine was 60 %
#   busy over the second half of the phase.
# - The images are built once before the solo phase (when a Docker engine can be had; the
#   tests say why not otherwise), so its two stacks, one per worker, find them cached;
#   stacks an earlier, killed session left are removed first.
# - Each phase runs under a deadline in minutes (tests/phase.sh), well above its usual
#   time (parallel 25-34, image 1-8, solo 10-11) and together inside CI's 90 minutes: a
#   hang fails its phase, saying where, instead of taking all of CI's time (on 2026-12-07
#   one did, with nothing printed about where).
test: setup lint
	tests/phase.sh parallel 50 $(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder \
		--durations=20 -m "not solo" --junitxml=.data/test-artifacts/junit-parallel.xml; \
	parallel=$$?; \
	if docker/engine.sh >/dev/null 2>&1; then \
		tests/phase.sh image 15 $(MAKE) -s image && tests/remove-leftover-stacks.sh; fi; \
	tests/phase.sh solo 18 $(BIN)/pytest -n 2 --dist loadfile -m solo --durations=5 \
		--junitxml=.data/test-artifacts/junit-solo.xml; \
	solo=$$?; \
	test $$parallel -eq 0 && test $$solo -eq 0

# Every language (docs/development.md, "What make lint runs"): Python (ruff, and mypy on
# replicator/ as pyproject.toml's [tool.mypy] configures it, its cache in .data/mypy-cache),
# the Helm chart (helm lint --strict, helm's homes under .data/helm so nothing of the
# user's is read), the alert rules of deploy/monitoring/ (promtool check rules on each rule
# file, promtool test rules on each *.test.yml), then the data plane's Rust.
# The data plane's crate is checked with the cargo on PATH that setup.py builds it with,
# into the same target directory (~/.cache/replicator/cargo-target, CARGO_TARGET_DIR
# overrides: librdkafka is not compiled twice); with no cargo on PATH the crate is not
# built either (setup.py installs without it), so its lint is skipped, saying so.
HELM_CHART := deploy/helm/replicator
RULE_FILES := $(filter-out %.test.yml,$(wildcard deploy/monitoring/*.yml))
RULE_TESTS := $(wildcard deploy/monitoring/*.test.yml)
HELM_LINT_HOMES := HELM_CACHE_HOME=$(abspath .data/helm/cache) \
	HELM_CONFIG_HOME=$(abspath .data/helm/config) HELM_DATA_HOME=$(abspath .data/helm/data)

lint: $(VENV)/.installed $(RUST_LINT_STAMP) $(K8S_DIR)/.helm $(PROMETHEUS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@test -x $(BIN)/mypy || { echo "mypy is not in $(VENV): it is pinned in requirements.lock; rm $(VENV)/.installed and run make setup" >&2; exit 1; }
	$(BIN)/mypy
	@test -x $(K8S_BIN)/helm || { echo "helm is not built ($(K8S_BIN)/helm): rm $(K8S_DIR)/.helm and run make setup" >&2; exit 1; }
	$(HELM_LINT_HOMES) $(K8S_BIN)/helm lint --strict --quiet $(HELM_CHART)
	@command -v promtool >/dev/null || { echo "promtool is not on PATH: it comes with Debian's prometheus package (rm $(PROMETHEUS_STAMP) and run make setup)" >&2; exit 1; }
	promtool check rules $(RULE_FILES)
	promtool test rules $(RULE_TESTS)
	@command -v cargo >/dev/null || echo "cargo is not on PATH: the data plane's Rust lint is skipped"
	if command -v cargo >/dev/null; then cd dataplane && cargo fmt --check; fi
	if command -v cargo >/dev/null; then cd dataplane && \
		CARGO_TARGET_DIR=$${CARGO_TARGET_DIR:-$$HOME/.cache/replicator/cargo-target} \
		cargo clippy --release --all-targets -- -D warnings; fi

format: $(VENV)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The documentation site (mkdocs.yml) on http://127.0.0.1:8000; make test builds it --strict
# (tests/integration/docs/test_docs_site.py, which also opens it in Chromium).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8000

lock: $(VENV)/.installed
	$(BIN)/uv pip compile -q requirements.in -o requirements.lock --python-version 3.11

clean:
	-test -x $(BIN)/replicator && $(BIN)/replicator stack down
	rm -rf $(VENV) .cache .data

# --- Docker: the image and the whole system in docker-compose (docker-compose.yml) ---
# A Docker engine is started here when none answers (Debian's docker.io, as root; its
# data root outlives the clone, so layers stay cached), and the base image is built
# from Debian's archive (debootstrap), since no registry of images answers here.
# Elsewhere: make image DOCKER_BASE_IMAGE=debian:bookworm-slim (pulled, not built).
DOCKER_BASE_IMAGE ?= replicator-base:bookworm
IMAGE ?= replicator:latest
ENGINE_IMAGE ?= replicator-engine:latest
POSTGRES_IMAGE ?= replicator-postgres:latest
# Debian's docker-compose 1.29 (bookworm has no compose v2 plugin); v2 reads the file too.
COMPOSE ?= docker-compose
# The engine's classic builder: BuildKit needs the buildx plugin, which is not here.
DOCKER_BUILD := DOCKER_BUILDKIT=0 docker build -q

.PHONY: docker-engine base-image image compose-up compose-down

docker-engine:
	docker/engine.sh

base-image: docker-engine
	@if [ "$(DOCKER_BASE_IMAGE)" = replicator-base:bookworm ]; then \
		docker/base-image.sh $(DOCKER_BASE_IMAGE); fi

image: base-image
	$(DOCKER_BUILD) --build-arg BASE_IMAGE=$(DOCKER_BASE_IMAGE) -t $(IMAGE) .
	$(DOCKER_BUILD) --build-arg BASE_IMAGE=$(DOCKER_BASE_IMAGE) --target engine -t $(ENGINE_IMAGE) .
	$(DOCKER_BUILD) --build-arg BASE_IMAGE=$(DOCKER_BASE_IMAGE) -t $(POSTGRES_IMAGE) docker/postgres

.env:
	docker/make-env.sh $@

compose-up: image .env
	$(COMPOSE) up -d
	docker/wait-healthy.sh $$(sed -n 's/^COMPOSE_PROJECT_NAME=//p' .env)

compose-down:
	$(COMPOSE) down
