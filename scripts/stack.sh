#!/usr/bin/env bash
# The local stack: a throwaway RabbitMQ node and PostgreSQL cluster on loopback, in a
# temporary folder, on free ports. Used by the tests, the demo and benchmarks.
#
#   scripts/stack.sh install            install missing Debian packages (needs root)
#   scripts/stack.sh run -- CMD [ARG…]  start both servers, run CMD with the URLs exported,
#                                       stop everything when CMD ends (exit status is CMD's)
#   scripts/stack.sh start              start both servers and print `export` lines for a shell;
#                                       stop them later with `scripts/stack.sh stop`
#   scripts/stack.sh stop               stop the servers of ASTRO_STACK_DIR and remove its folder
#   scripts/stack.sh definitions        print the broker definitions the stack loads (users with
#                                       their development passwords, permissions, policies)
#   scripts/stack.sh rabbit-stop | rabbit-start | rabbit-restart | rabbit-ctl ARG…
#   scripts/stack.sh pg-stop | pg-start | pg-restart
#                                       stop/start one server of ASTRO_STACK_DIR, keeping its data
#                                       and port (the chaos and reconnect tests use these);
#                                       rabbit-ctl runs rabbitmqctl against the stack's node
#
# Exported to CMD (and printed by `start`):
#   AMQP_URL       amqp://astro:astro@127.0.0.1:<port>/%2F
#   AMQPS_URL      amqps://astro:astro@localhost:<tls-port>/%2F (TLS listener, test CA)
#   AMQP_CA_FILE   the test CA that signed the TLS listener's certificate
#   DATABASE_URL   postgres://astro:astro@127.0.0.1:<port>/astro
#   CHART_WORKER_AMQP_URL, BILLING_WORKER_AMQP_URL, REPORT_WORKER_AMQP_URL,
#   STORY_WORKER_AMQP_URL, CLIENT_AMQP_URL, GATEWAY_AMQP_URL, OPERATOR_AMQP_URL,
#   MAINTENANCE_AMQP_URL
#                  each service's own broker user (deploy/rabbitmq/definitions.json, loaded at
#                  boot with development passwords), limited to what that service may do
#   ASTRO_STACK_DIR  the temporary folder holding both servers' data and logs
#
# Why plain processes and not systemd or Docker: CI and developer machines here have neither a
# running init system nor a Docker engine. See shared INFRA notes for the measured commands.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The broker's users and permissions (astroctl broker definitions --template), and the
# development passwords the local stack gives them: <user>-dev.
DEFINITIONS_TEMPLATE=$here/../deploy/rabbitmq/definitions.json
SERVICE_USERS=(chart-worker billing-worker report-worker story-worker astro-client gateway astro-operator
    maintenance)
# The largest message body the broker accepts: the workers' MAX_MESSAGE_BYTES default.
MAX_MESSAGE_BYTES=262144
PACKAGES=(librabbitmq-dev libpq-dev libswe-dev swe-standard-data rabbitmq-server postgresql
    postgresql-contrib amqp-tools curl tzdata)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
RABBITBIN=/usr/lib/rabbitmq/bin

log() { printf 'stack: %s\n' "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }

install_packages() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then return 0; fi
    log "installing ${missing[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    # policy-rc.d keeps the packages' own services from starting: we run our own instances.
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

free_port() {
    # A port nothing listens on, below the kernel's ephemeral range: a restarted server gets its
    # port back only if no outgoing connection was handed it meanwhile, and clients reconnecting
    # in a loop to a stopped server inside that range can even connect to themselves (TCP
    # simultaneous open) and hold it. One such restart failed CI with eaddrinuse.
    python3 - "$@" <<'EOF'
import random, socket
low = 32768
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    pass
top = low - 1 if low > 12000 else 65535
bottom = 10000 if low > 12000 else 61000
for _ in range(500):
    p = random.randint(bottom, top)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    raise SystemExit("no free port found between %d and %d" % (bottom, top))
EOF
}

make_test_certificates() { # dir: a throwaway CA and a server certificate for localhost/127.0.0.1
    local t=$1
    mkdir -p "$t"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=astro-stack-test-ca" \
        -keyout "$t/ca.key" -out "$t/ca.pem" >/dev/null 2>&1
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
        -keyout "$t/server.key" -out "$t/server.csr" >/dev/null 2>&1
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$t/ext.cnf"
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 2 \
        -extfile "$t/ext.cnf" -out "$t/server.pem" >/dev/null 2>&1
    chmod 644 "$t"/*
}

rabbit_configure() { # choose ports and write the node's configuration
    local rd=$ASTRO_STACK_DIR/rabbit rport epmd tport dport
    rport=$(free_port); epmd=$(free_port); tport=$(free_port); dport=$(free_port)
    echo "$rport" > "$rd/port"; echo "$epmd" > "$rd/epmd_port"; echo "$tport" > "$rd/tls_port"
    echo "$dport" > "$rd/dist_port"
    cat > "$rd/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$rport
listeners.ssl.default = 127.0.0.1:$tport
ssl_options.cacertfile = $rd/tls/ca.pem
ssl_options.certfile = $rd/tls/server.pem
ssl_options.keyfile = $rd/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
default_user = astro
default_pass = astro
default_vhost = /
loopback_users = none
max_message_size = $MAX_MESSAGE_BYTES
load_definitions = $rd/definitions.json
EOF
    render_definitions > "$rd/definitions.json"
}

render_definitions() { # the template with the administrator astro/astro and <user>-dev passwords
    [ -f "$DEFINITIONS_TEMPLATE" ] || die "missing $DEFINITIONS_TEMPLATE"
    sed -e 's/${RABBITMQ_USER}/astro/g' -e 's/${RABBITMQ_PASSWORD}/astro/g' \
        -e 's/${CHART_WORKER_AMQP_PASSWORD}/chart-worker-dev/g' \
        -e 's/${BILLING_WORKER_AMQP_PASSWORD}/billing-worker-dev/g' \
        -e 's/${REPORT_WORKER_AMQP_PASSWORD}/report-worker-dev/g' \
        -e 's/${STORY_WORKER_AMQP_PASSWORD}/story-worker-dev/g' \
        -e 's/${CLIENT_AMQP_PASSWORD}/astro-client-dev/g' \
        -e 's/${GATEWAY_AMQP_PASSWORD}/gateway-dev/g' \
        -e 's/${OPERATOR_AMQP_PASSWORD}/astro-operator-dev/g' \
        -e 's/${MAINTENANCE_AMQP_PASSWORD}/maintenance-dev/g' "$DEFINITIONS_TEMPLATE"
}

rabbit_env() {
    local d=$ASTRO_STACK_DIR/rabbit
    local port epmd dist
    port=$(cat "$d/port"); epmd=$(cat "$d/epmd_port"); dist=$(cat "$d/dist_port")
    export HOME=$d RABBITMQ_NODENAME=astro$port@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
        RABBITMQ_NODE_PORT=$port RABBITMQ_DIST_PORT=$dist ERL_EPMD_PORT=$epmd \
        ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_MNESIA_BASE=$d/mnesia RABBITMQ_LOG_BASE=$d/log \
        RABBITMQ_CONF_ENV_FILE=$d/env.conf RABBITMQ_CONFIG_FILE=$d/rabbitmq.conf \
        RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins RABBITMQ_PID_FILE=$d/rabbit.pid \
        PATH=$RABBITBIN:$PATH \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

wait_tcp() { # host port seconds
    local deadline=$((SECONDS + $3))
    while ! (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.2
    done
}

rabbit_start() {
    local d=$ASTRO_STACK_DIR/rabbit port
    port=$(cat "$d/port")
    # The servers belong to the stack, not to a test that restarts them: they do not carry its mark
    # (scripts/leftovers.sh would end them with the test).
    ( rabbit_env; unset ASTRO_TEST_RUN_ID; nohup "$RABBITBIN/rabbitmq-server" >>"$d/server.out" 2>&1 & echo $! > "$d/launcher.pid" )
    # The AMQP listener opens only once the broker has booted completely.
    if ! wait_tcp 127.0.0.1 "$port" 90; then
        tail -20 "$d/server.out" >&2 || true
        log "RabbitMQ did not open port $port within 90 s (log: $d/log)"
        return 1
    fi
    # The listener opens a moment before the default user exists; wait for a login to work.
    local deadline=$((SECONDS + 30))
    until amqp-declare-queue --url="amqp://astro:astro@127.0.0.1:$port/%2F" -q astro.stack.probe -d \
        >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { log "RabbitMQ on port $port refuses the astro login"; return 1; }
        sleep 0.3
    done
    amqp-delete-queue --url="amqp://astro:astro@127.0.0.1:$port/%2F" -q astro.stack.probe >/dev/null 2>&1 || true
}

rabbit_stop() { # mode: graceful (SIGTERM, then SIGKILL after 15 s) | kill
    local d=$ASTRO_STACK_DIR/rabbit pid
    [ -f "$d/rabbit.pid" ] || return 0
    pid=$(cat "$d/rabbit.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        if [ "${1:-graceful}" = graceful ]; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$d/rabbit.pid"
}

epmd_stop() {
    local d=$ASTRO_STACK_DIR/rabbit epmd pid
    [ -f "$d/epmd_port" ] || return 0
    epmd=$(cat "$d/epmd_port")
    # epmd daemonizes and outlives the node; ours is the one started with our private port in
    # its environment.
    ERL_EPMD_PORT=$epmd timeout 5 /usr/lib/erlang/erts-*/bin/epmd -kill >/dev/null 2>&1 || true
    for pid in $(pgrep -x epmd 2>/dev/null); do
        if { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qx "ERL_EPMD_PORT=$epmd"; then
            kill "$pid" 2>/dev/null || true
        fi
    done
}

pg_ctl_as() { env -u ASTRO_TEST_RUN_ID runuser -u postgres -- "$PGBIN/pg_ctl" "$@"; }

pg_start() {
    local d=$ASTRO_STACK_DIR/pg port
    port=$(cat "$d/port")
    pg_ctl_as -D "$d/data" -l "$d/pg.log" -w -t 60 \
        -o "-p $port -k $d -c listen_addresses=127.0.0.1 -c max_connections=300 ${ASTRO_PG_OPTIONS:-}" \
        start >/dev/null || { tail -20 "$d/pg.log" >&2; die "PostgreSQL did not start on port $port"; }
}

pg_stop() { # mode: fast | immediate
    local d=$ASTRO_STACK_DIR/pg
    [ -f "$d/data/postmaster.pid" ] || return 0
    pg_ctl_as -D "$d/data" -m "${1:-fast}" -w -t 60 stop >/dev/null 2>&1 || true
}

start_all() {
    install_packages
    command -v python3 >/dev/null || die "python3 is needed to find free ports"
    ASTRO_STACK_DIR=$(mktemp -d /tmp/astro-stack.XXXXXX)
    export ASTRO_STACK_DIR
    chmod 755 "$ASTRO_STACK_DIR"

    # RabbitMQ: its own HOME (Erlang cookie), node name, ports and epmd, so several stacks and
    # a system broker can coexist.
    local rd=$ASTRO_STACK_DIR/rabbit
    mkdir -p "$rd/mnesia" "$rd/log"
    : > "$rd/env.conf"
    echo '[].' > "$rd/enabled_plugins"
    make_test_certificates "$rd/tls"
    rabbit_configure

    # PostgreSQL refuses to run as root: it runs as the postgres user in its own folder.
    local pd=$ASTRO_STACK_DIR/pg pport
    mkdir -p "$pd"; chown postgres: "$pd"
    pport=$(free_port); echo "$pport" > "$pd/port"
    runuser -u postgres -- "$PGBIN/initdb" -D "$pd/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
        --no-sync >"$pd/initdb.log" 2>&1 || { cat "$pd/initdb.log" >&2; die "initdb failed"; }

    log "starting PostgreSQL on 127.0.0.1:$pport and RabbitMQ on 127.0.0.1:$(cat "$rd/port") (folder $ASTRO_STACK_DIR)"
    pg_start
    (
        # A free port can be taken by someone else between choosing it and binding it: then
        # start again on other ports.
        for attempt in 1 2 3; do
            rabbit_start && exit 0
            log "RabbitMQ start attempt $attempt failed; retrying on other ports"
            rabbit_stop; epmd_stop; rm -rf "$rd/mnesia" "$rd/log"; mkdir -p "$rd/mnesia" "$rd/log"
            rabbit_configure
        done
        exit 1
    ) &
    local rabbit_job=$!
    psql -q -h 127.0.0.1 -p "$pport" -U postgres -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE astro LOGIN SUPERUSER PASSWORD 'astro'" -c "CREATE DATABASE astro OWNER astro" >/dev/null
    wait "$rabbit_job" || die "RabbitMQ failed to start"
    local rport tport
    rport=$(cat "$rd/port"); tport=$(cat "$rd/tls_port")

    export AMQP_URL="amqp://astro:astro@127.0.0.1:$rport/%2F"
    export AMQPS_URL="amqps://astro:astro@localhost:$tport/%2F"
    export AMQP_CA_FILE="$rd/tls/ca.pem"
    export DATABASE_URL="postgres://astro:astro@127.0.0.1:$pport/astro"
    printf 'export ASTRO_STACK_DIR=%q\nexport AMQP_URL=%q\nexport AMQPS_URL=%q\nexport AMQP_CA_FILE=%q\nexport DATABASE_URL=%q\n' \
        "$ASTRO_STACK_DIR" "$AMQP_URL" "$AMQPS_URL" "$AMQP_CA_FILE" "$DATABASE_URL" > "$ASTRO_STACK_DIR/env.sh"
    local user variable
    for user in "${SERVICE_USERS[@]}"; do
        variable=$(printf '%s' "${user#astro-}" | tr 'a-z-' 'A-Z_')_AMQP_URL
        export "$variable=amqp://$user:$user-dev@127.0.0.1:$rport/%2F"
        printf 'export %s=%q\n' "$variable" "${!variable}" >> "$ASTRO_STACK_DIR/env.sh"
    done
    log "ready: AMQP_URL=$AMQP_URL DATABASE_URL=$DATABASE_URL"
}

stop_all() {
    [ -n "${ASTRO_STACK_DIR:-}" ] && [ -d "$ASTRO_STACK_DIR" ] || return 0
    log "stopping the stack in $ASTRO_STACK_DIR"
    if [ -n "${ASTRO_KEEP_STACK:-}" ]; then
        rabbit_stop graceful
        epmd_stop
        pg_stop fast
        return 0
    fi
    # The folder is deleted next, so nothing is worth a clean shutdown: a graceful stop of a
    # broker and a cluster with sixty suites' vhosts and databases behind them took 93 s in a
    # loaded CI run (PostgreSQL's shutdown checkpoint, RabbitMQ's message stores).
    rabbit_stop kill
    epmd_stop
    pg_stop immediate
    rm -rf "$ASTRO_STACK_DIR"
}

need_dir() { [ -n "${ASTRO_STACK_DIR:-}" ] && [ -d "$ASTRO_STACK_DIR" ] || die "ASTRO_STACK_DIR is not set to a running stack's folder"; }

cmd=${1:-}
shift || true
case "$cmd" in
    install) install_packages ;;
    run)
        [ "${1:-}" = "--" ] && shift
        [ $# -gt 0 ] || die "usage: stack.sh run -- CMD [ARG…]"
        trap stop_all EXIT
        trap 'exit 130' INT TERM
        start_all
        set +e
        "$@"
        status=$?
        set -e
        exit $status
        ;;
    start)
        start_all
        cat "$ASTRO_STACK_DIR/env.sh"
        ;;
    stop) stop_all ;;
    definitions) render_definitions ;;
    rabbit-stop) need_dir; rabbit_stop ;;
    rabbit-start) need_dir; rabbit_start ;;
    rabbit-restart) need_dir; rabbit_stop; rabbit_start ;;
    rabbit-ctl) need_dir; ( rabbit_env; exec "$RABBITBIN/rabbitmqctl" "$@" ) ;;
    pg-stop) need_dir; pg_stop "${1:-fast}" ;;
    pg-start) need_dir; pg_start ;;
    pg-restart) need_dir; pg_stop "${1:-fast}"; pg_start ;;
    *)
        sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        [ -z "$cmd" ] || exit 2
        ;;
esac
