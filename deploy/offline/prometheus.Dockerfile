# A stand-in for prom/prometheus, for machines that cannot pull from Docker Hub
# (scripts/compose-check.sh builds it only then): Debian 12's prometheus package, started the way
# the official image starts it (entrypoint the server, arguments from compose's `command`), with
# its data in /prometheus and wget for compose's health check.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus wget \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus \
    && chown prometheus:prometheus /prometheus
USER prometheus
VOLUME /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
