# One image for every role of the system (docker-compose.yml runs them all):
#   replicator run --config ...             the replication engine
#   replicator stack broker ...             a single-node KRaft Kafka cluster (the launcher
#                                           the embedded default uses)
#   airflow api-server|scheduler|dag-processor|triggerer
#   spark-class org.apache.spark.deploy.master.Master | ...worker.Worker spark://...
# The HEALTHCHECK finds the role from the running command (docker/healthcheck.py).
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

# --- The runtime: Python 3.11 (Debian's) with the pinned lock, a Java 17 runtime.
FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="replicator" \
      org.opencontainers.image.description="Kafka disaster recovery: MM2-compatible replication, failover and failback procedures, Airflow DAGs, Spark verification" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      python3 python3-venv openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    UV_NATIVE_TLS=1 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /opt/replicator
COPY requirements.lock ./
RUN python3 -m venv /opt/venv \
 && pip install -q --no-cache-dir --disable-pip-version-check "uv==$(sed -n 's/^uv==//p' requirements.lock)" \
 && uv pip sync -q --no-cache --python /opt/venv/bin/python requirements.lock

# The checkout, installed in place (the Spark job, the GX suites and the jars are found
# beside the package until the project ships them as package data).
COPY --from=jvm /src/.cache/jvm .cache/jvm
COPY pyproject.toml README.md ./
COPY replicator replicator
COPY spark spark
COPY expectations expectations
COPY include include
COPY dags dags
COPY plugins plugins
COPY docker/healthcheck.py /usr/local/bin/healthcheck
# The volumes' mount points belong to the user: a new named volume takes their owner.
RUN uv pip install -q --no-cache --python /opt/venv/bin/python --no-deps -e . \
 && python -m compileall -q replicator dags plugins spark \
 && useradd --system --uid 10001 --create-home --home-dir /home/replicator replicator \
 && mkdir -p /var/lib/kafka /opt/airflow/logs /data/demo /opt/replicator/.data/verification \
 && chown -R replicator:replicator /var/lib/kafka /opt/airflow /data /opt/replicator/.data

ENV REPLICATOR_JVM_DIR=/opt/replicator/.cache/jvm \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    AIRFLOW_HOME=/opt/airflow \
    AIRFLOW__CORE__DAGS_FOLDER=/opt/replicator/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/opt/replicator/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False
USER replicator
HEALTHCHECK --interval=15s --timeout=10s --start-period=120s --retries=5 CMD ["healthcheck"]
CMD ["replicator", "--help"]
