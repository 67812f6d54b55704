# A stand-in for the official rabbitmq:3.13-management image, for machines that cannot pull
# from Docker Hub (scripts/compose-check.sh builds it only then): Debian 12's rabbitmq-server
# (3.10) with the management plugin. RABBITMQ_DEFAULT_USER and RABBITMQ_DEFAULT_PASS are read by
# the server itself; data in /var/lib/rabbitmq; rabbitmq-diagnostics on the PATH.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rabbitmq-server \
    && rm -rf /var/lib/apt/lists/* \
    && rabbitmq-plugins enable --offline rabbitmq_management \
    && printf 'loopback_users = none\nlisteners.tcp.default = 5672\nmanagement.tcp.port = 15672\n' \
        > /etc/rabbitmq/rabbitmq.conf
ENV HOME=/var/lib/rabbitmq
VOLUME /var/lib/rabbitmq
EXPOSE 5672 15672
CMD ["rabbitmq-server"]
