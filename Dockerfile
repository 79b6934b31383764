# Two images. The target `engine` is the replication engine alone (docker-compose.yml's
# replicator services, the Helm chart). The last stage, the default, is one image for
# every other role of the system:
#   replicator run --config ...             the replication engine
#   replicator stack broker ...             a single-node KRaft Kafka cluster (the launcher
#                                           the embedded default uses)
#   airflow api-server|scheduler|dag-processor|triggerer
#   replicator verification-server ...     the verification server (Spark Connect)
#   spark-class org.apache.spark.deploy.master.Master | ...worker.Worker spark://...
# The HEALTHCHECK finds the role from the running command (docker/healthcheck.py).
# The project is installed as its wheel with the extras every role needs, pinned by
# requirements.lock; the Airflow plugin and the `replicator` connection type come from
# the wheel's entry points, the DAGs and the demo application are copied beside it.
#
#   make image                                          # base built here by debootstrap
#   docker build --build-arg BASE_IMAGE=debian:bookworm-slim -t replicator .   # public base
ARG BASE_IMAGE=debian:bookworm-slim

# --- JVM artifacts: the Kafka/MM2 jars and Spark's Kafka connector, resolved by Maven
#     with the Makefile's own rules (same poms, same settings, same exclusions).
FROM ${BASE_IMAGE} AS jvm
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      make maven openjdk-17-jdk-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile requirements.lock ./
COPY include/jvm include/jvm
RUN make .cache/jvm/kafka/.resolved .cache/jvm/spark-kafka/.resolved \
 && rm -rf /root/.m2

# --- The compiled data plane (replicator._dataplane, dataplane/, docs/dataplane.md): Rust
#     with Debian's cargo-web and rustc-web (bookworm's Rust for Firefox, 1.85 or later;
#     its plain rustc, 1.63, is too old for rust-rdkafka), crates from crates.io at
#     Cargo.lock's versions, librdkafka from rdkafka-sys's vendored source (its configure
#     insists on a C++ compiler: g++), linked
#     statically; OpenSSL is the system's (libssl3 in the runtime images). A stage fed
#     only dataplane/, so a change of the Python code reuses its layer: the first build
#     compiles librdkafka (minutes on 2 cores), later ones nothing.
FROM ${BASE_IMAGE} AS dataplane
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      cargo-web rustc-web gcc g++ libc6-dev make perl pkg-config libssl-dev python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY dataplane dataplane
RUN cargo build -q --release --locked --features extension-module \
      --manifest-path dataplane/Cargo.toml \
 && cp dataplane/target/release/lib_dataplane.so /lib_dataplane.so \
 && rm -rf dataplane/target /root/.cargo/registry

# --- The wheel: replicator, replicator_airflow, replicator_spark, replicator_expectations,
#     with the data plane built above (setup.py packs the library REPLICATOR_DATAPLANE_LIB
#     names; REPLICATOR_REQUIRE_RUST=1: a wheel without it fails the build).
FROM ${BASE_IMAGE} AS wheel
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
WORKDIR /src
COPY --from=dataplane /lib_dataplane.so /tmp/lib_dataplane.so
COPY pyproject.toml setup.py README.md ./
COPY replicator replicator
COPY plugins/replicator_airflow plugins/replicator_airflow
COPY spark/replicator_spark spark/replicator_spark
COPY expectations/replicator_expectations expectations/replicator_expectations
RUN REPLICATOR_DATAPLANE_LIB=/tmp/lib_dataplane.so REPLICATOR_REQUIRE_RUST=1 \
      python3 -m pip wheel -q --no-cache-dir --disable-pip-version-check --no-deps -w /dist .
# The lab's wheel (lab/: the local stack), for the full image alone: the demo's Kafka
# containers run `replicator stack serve`. The engine image does not get it.
COPY lab lab
RUN python3 -m pip wheel -q --no-cache-dir --disable-pip-version-check --no-deps -w /dist-lab ./lab

# --- The engine image (`make image` tags it $(ENGINE_IMAGE); `--target engine`): what a
#     replicator worker needs and nothing else: Python, the project's core dependencies
#     and its wheel. No JDK, no Airflow, no Spark, no GX. Runs as a
#     non-root user; healthy means replicating (docker/healthcheck.py, replicator.probe).
FROM ${BASE_IMAGE} AS engine
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="replicator-engine" \
      org.opencontainers.image.description="Kafka disaster recovery: the MM2-compatible replication engine (replicator run, init, status)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-venv libjemalloc2 \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/*
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
WORKDIR /opt/replicator
# The core dependencies and the PostgreSQL driver (the production state store) at the
# lock's versions; not the launchers' clients (docker, kubernetes: the supervisor's, in
# Airflow). Their layer changes only with the lock or pyproject.toml, so a change of the
# project's code rebuilds the wheel's layer alone. --compile-bytecode: the containers'
# user cannot write .pyc files into /opt/venv, so without them every process compiles
# all it imports afresh.
COPY requirements.lock pyproject.toml ./
RUN python3 -m venv /opt/venv \
 && pip install -q --no-cache-dir --disable-pip-version-check "uv==$(sed -n 's/^uv==//p' requirements.lock)" \
 && UV_NATIVE_TLS=1 uv pip install -q --no-cache --compile-bytecode --python /opt/venv/bin/python \
      -r pyproject.toml --extra postgres -c requirements.lock \
 && pip uninstall -q -y uv \
 && rm pyproject.toml
# The project's wheel (pip compiles its bytecode), checked against what is installed;
# pip leaves the image after.
COPY --from=wheel /dist /tmp/dist
RUN pip install -q --no-cache-dir --disable-pip-version-check --no-deps /tmp/dist/*.whl \
 && pip check \
 && pip uninstall -q -y pip \
 && rm -rf /tmp/dist
COPY include/config include/config
COPY docker/healthcheck.py /usr/local/bin/healthcheck
RUN useradd --system --uid 10001 --create-home --home-dir /home/replicator replicator \
 && mkdir -p /opt/replicator/.data && chown replicator:replicator /opt/replicator/.data
USER replicator
HEALTHCHECK --interval=15s --timeout=10s --start-period=120s --retries=5 CMD ["healthcheck"]
CMD ["replicator", "--help"]

# --- The assets Data Docs load from CDNs (Bootstrap, jQuery, Vega, ...), pinned in
#     include/vendor/data-docs/package-lock.json: `npm ci`, as `make setup` does, with
#     Debian's npm on the same base. The plugin serves them (REPLICATOR_DATA_DOCS_ASSETS).
FROM ${BASE_IMAGE} AS data-docs
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
WORKDIR /src
COPY include/vendor/data-docs/package.json include/vendor/data-docs/package-lock.json \
     include/vendor/data-docs/.npmrc ./
RUN npm ci -q --ignore-scripts --no-audit --no-fund

# --- The runtime: Python 3.11 (Debian's) with the project's wheel, a Java 17 runtime.
FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="replicator" \
      org.opencontainers.image.description="Kafka disaster recovery: MM2-compatible replication, failover and failback procedures, Airflow DAGs, Spark verification" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-venv libjemalloc2 openjdk-17-jre-headless procps \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    UV_NATIVE_TLS=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /opt/replicator
# The dependencies first (their layer changes only with the lock or pyproject.toml): what
# the project and its extras declare, at the lock's versions; no test or lint tools.
ARG EXTRAS="--extra airflow --extra spark --extra gx --extra postgres --extra docker --extra kubernetes"
COPY requirements.lock pyproject.toml ./
RUN python3 -m venv /opt/venv \
 && pip install -q --no-cache-dir --disable-pip-version-check "uv==$(sed -n 's/^uv==//p' requirements.lock)" \
 && uv pip install -q --no-cache --compile-bytecode --python /opt/venv/bin/python -r pyproject.toml ${EXTRAS} \
      -c requirements.lock \
 && pip uninstall -q -y uv \
 && rm pyproject.toml

# The project: its wheel (not the checkout), and the lab's (the demo's clusters), checked
# against what is installed.
COPY --from=wheel /dist /tmp/dist
COPY --from=wheel /dist-lab /tmp/dist
RUN pip install -q --no-cache-dir --disable-pip-version-check --no-deps /tmp/dist/*.whl \
 && pip check \
 && rm -rf /tmp/dist
COPY --from=jvm /src/.cache/jvm /opt/replicator/jvm
COPY --from=data-docs /src/node_modules /opt/replicator/data-docs/node_modules
COPY include/config include/config
COPY include/demo include/demo
COPY dags dags
COPY docker/healthcheck.py /usr/local/bin/healthcheck
# The volumes' mount points belong to the user: a new named volume takes their owner.
RUN python -m compileall -q dags include/demo \
 && useradd --system --uid 10001 --create-home --home-dir /home/replicator replicator \
 && mkdir -p /var/lib/kafka /opt/airflow/logs /opt/airflow/plugins /data/demo \
      /opt/replicator/.data/verification \
 && chown -R replicator:replicator /var/lib/kafka /opt/airflow /data /opt/replicator/.data

# The plugins folder is empty: the DR status plugin is the wheel's `airflow.plugins`
# entry point. A broker logs to stdout (`docker logs`) as well as to server.log.
ENV REPLICATOR_JVM_DIR=/opt/replicator/jvm \
    REPLICATOR_DATA_DOCS_ASSETS=/opt/replicator/data-docs/node_modules \
    REPLICATOR_BROKER_CONSOLE_LOG=info \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/replicator/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/airflow/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
USER replicator
HEALTHCHECK --interval=15s --timeout=10s --start-period=120s --retries=5 CMD ["healthcheck"]
CMD ["replicator", "--help"]
