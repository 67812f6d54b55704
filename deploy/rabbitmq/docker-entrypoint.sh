#!/bin/sh
# The broker's users and permissions for docker compose: renders definitions.json (the template
# `astroctl broker definitions --template` writes, mounted at /etc/astro/definitions.json) with
# the passwords from the environment, tells RabbitMQ to load it at boot (with the largest message
# size the workers accept), then starts RabbitMQ the way the image does.
#
# `docker-entrypoint.sh --render-only FILE` writes the rendered definitions to FILE and exits
# (the template is $ASTRO_DEFINITIONS_TEMPLATE, default /etc/astro/definitions.json).
set -eu

template=${ASTRO_DEFINITIONS_TEMPLATE:-/etc/astro/definitions.json}
output=/etc/rabbitmq/definitions.json
if [ "${1:-}" = "--render-only" ]; then
    output=${2:?"--render-only needs a file"}
fi

# A value goes into a JSON string (backslash and double quote escaped) inside a sed replacement
# (backslash, & and the | delimiter escaped). Control characters have no place in a password.
escape() {
    printf '%s' "$1" | sed -e 's/[\\"]/\\&/g' -e 's/[\\&|]/\\&/g'
}
for variable in RABBITMQ_USER RABBITMQ_PASSWORD CHART_WORKER_AMQP_PASSWORD BILLING_WORKER_AMQP_PASSWORD \
    REPORT_WORKER_AMQP_PASSWORD STORY_WORKER_AMQP_PASSWORD CLIENT_AMQP_PASSWORD GATEWAY_AMQP_PASSWORD \
    OPERATOR_AMQP_PASSWORD MAINTENANCE_AMQP_PASSWORD; do
    eval "value=\${$variable:-}"
    if [ -z "$value" ]; then
        echo "rabbitmq: $variable is not set" >&2
        exit 1
    fi
    if printf '%s' "$value" | LC_ALL=C grep -q '[[:cntrl:]]'; then
        echo "rabbitmq: $variable contains a control character (a newline?); choose another" >&2
        exit 1
    fi
    case $value in
        *"
"*)
            echo "rabbitmq: $variable contains a newline; choose another" >&2
            exit 1
            ;;
    esac
done
sed -e "s|\${RABBITMQ_USER}|$(escape "$RABBITMQ_USER")|g" \
    -e "s|\${RABBITMQ_PASSWORD}|$(escape "$RABBITMQ_PASSWORD")|g" \
    -e "s|\${CHART_WORKER_AMQP_PASSWORD}|$(escape "$CHART_WORKER_AMQP_PASSWORD")|g" \
    -e "s|\${BILLING_WORKER_AMQP_PASSWORD}|$(escape "$BILLING_WORKER_AMQP_PASSWORD")|g" \
    -e "s|\${REPORT_WORKER_AMQP_PASSWORD}|$(escape "$REPORT_WORKER_AMQP_PASSWORD")|g" \
    -e "s|\${STORY_WORKER_AMQP_PASSWORD}|$(escape "$STORY_WORKER_AMQP_PASSWORD")|g" \
    -e "s|\${CLIENT_AMQP_PASSWORD}|$(escape "$CLIENT_AMQP_PASSWORD")|g" \
    -e "s|\${GATEWAY_AMQP_PASSWORD}|$(escape "$GATEWAY_AMQP_PASSWORD")|g" \
    -e "s|\${OPERATOR_AMQP_PASSWORD}|$(escape "$OPERATOR_AMQP_PASSWORD")|g" \
    -e "s|\${MAINTENANCE_AMQP_PASSWORD}|$(escape "$MAINTENANCE_AMQP_PASSWORD")|g" \
    "$template" > "$output"
chmod 600 "$output"
if [ "${1:-}" = "--render-only" ]; then
    exit 0
fi
chown rabbitmq:rabbitmq /etc/rabbitmq/definitions.json 2>/dev/null || true
mkdir -p /etc/rabbitmq/conf.d
# Per-queue figures on the Prometheus exporter (port 15692): depth and consumers of each queue,
# which deploy/observability's alerts and dashboards read. The official image enables the plugin
# already; enabling it again changes nothing.
printf 'load_definitions = /etc/rabbitmq/definitions.json\nmax_message_size = %s\nprometheus.return_per_object_metrics = true\n' \
    "${MAX_MESSAGE_BYTES:-262144}" > /etc/rabbitmq/conf.d/90-astro.conf
rabbitmq-plugins enable --offline rabbitmq_prometheus >/dev/null ||
    echo "rabbitmq: could not enable rabbitmq_prometheus; the broker's metrics will be missing" >&2
if command -v docker-entrypoint.sh >/dev/null 2>&1; then
    exec docker-entrypoint.sh rabbitmq-server
fi
exec rabbitmq-server
