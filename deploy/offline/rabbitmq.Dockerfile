# A stand-in for the official rabbitmq:3.13-management image, for machines that cannot pull
# from Docker Hub (scripts/compose-check.sh builds it only then): Debian 12's rabbitmq-server
# (3.10) with the management and Prometheus plugins, configured from /etc/rabbitmq/conf.d like the official image
# (compose's entrypoint adds the users and limits there); data in /var/lib/rabbitmq;
# rabbitmq-diagnostics on the PATH.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rabbitmq-server \
    && rm -rf /var/lib/apt/lists/* \
    && rabbitmq-plugins enable --offline rabbitmq_management rabbitmq_prometheus \
    && mkdir -p /etc/rabbitmq/conf.d \
    && printf 'loopback_users = none\nlisteners.tcp.default = 5672\nmanagement.tcp.port = 15672\n' \
        > /etc/rabbitmq/conf.d/10-base.conf
# Every file of conf.d is read, as in the official image (compose adds its own there).
ENV HOME=/var/lib/rabbitmq RABBITMQ_CONFIG_FILES=/etc/rabbitmq/conf.d
VOLUME /var/lib/rabbitmq
EXPOSE 5672 15672 15692
CMD ["rabbitmq-server"]
