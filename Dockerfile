# minikafka: the broker, the workload generator and the Spark jobs in one image.
#
# One image for every role keeps the Python of the Spark driver (replay, report) and of
# the Spark executors (spark-worker) identical, as PySpark requires, and puts our
# packages on the executors, where the replay runs our code.
#
# Bookworm pinned (not the floating "slim" tag) so that a Java 17 runtime package exists.
FROM python:3.11-slim-bookworm

# Must match the spark-master image tag in docker-compose.yml: a standalone master and
# its workers speak one Spark version.
ARG SPARK_VERSION=4.0.1

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Java for Spark; procps because Spark's launch scripts call ps.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/minikafka
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY purgatory ./purgatory
COPY broker ./broker
COPY spark_jobs ./spark_jobs
COPY client_io ./client_io
COPY kafka_tools ./kafka_tools
COPY whatif ./whatif
COPY simulation ./simulation
COPY virtual_time ./virtual_time
COPY minikafka ./minikafka
# The spark extra is what every service of docker-compose.yml needs: PySpark (replay,
# report, the worker's executors) and aiokafka (the workload).
RUN pip install ".[spark]" "pyspark==${SPARK_VERSION}" \
    && python -c "import aiokafka, pyspark, matplotlib, pyarrow"

# A user of our own; the volume mount points exist (and are its) before the volumes
# are mounted, so fresh named volumes start owned by it.
RUN useradd --create-home --uid 1000 minikafka \
    && mkdir -p /captures /results /report /data \
    && chown minikafka:minikafka /captures /results /report /data
USER minikafka
WORKDIR /home/minikafka

EXPOSE 9092 9093 9094 9999
CMD ["minikafka", "serve", "--brokers", "3", "--host", "0.0.0.0", "--port", "9092"]
