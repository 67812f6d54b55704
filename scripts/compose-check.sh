#!/usr/bin/env bash
# Builds the image and runs the whole stack under docker compose with several chart-workers,
# then checks that it works as a user would see it:
#   - every service healthy, the one-shot migrate exited 0;
#   - Prometheus scrapes every worker replica, the gateway and the broker (all targets up);
#   - chart.calculate has one consumer per chart-worker, and a burst of chart jobs is spread
#     over all of them (their /metrics counters);
#   - a chart published with astroctl comes back stored (--wait);
#   - a story is written and illustrated, the pictures land in the named volume as uid 10001;
#   - a chart-worker killed with SIGKILL is restarted by its restart policy and healthy again;
#   - scaling down stops workers cleanly; `down -v` removes everything.
#
#   bash scripts/compose-check.sh            # SCALE=4 JOBS=400 by default
#
# Needs Docker with compose (the v2 plugin or docker-compose v1). As root, it starts dockerd
# itself when none answers. Base images come from Docker Hub; on a machine that cannot reach it
# they are built here instead (deploy/offline/: Debian 12 from debootstrap, the broker and the
# database from Debian's packages, the Swift build image from this machine's toolchain), and
# the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${SCALE:-4}
jobs=${JOBS:-400}
project=astrocheck
log() { printf '==> %s\n' "$*"; }
fail() {
    printf 'compose-check: %s\n' "$*" >&2
    exit 1
}

# --- Docker ---------------------------------------------------------------------------------
# What this script needs, installed from Debian's packages when missing and run as root: the
# daemon (docker.io), compose (docker-compose) and debootstrap for the offline base image.
missing=()
command -v docker >/dev/null && command -v dockerd >/dev/null || missing+=(docker.io)
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ]; then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null; }
fi
command -v docker >/dev/null || fail "no docker client (install docker.io or Docker Engine)"
if ! docker info >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null ||
        fail "no Docker daemon answers, and this user cannot start one (run as root, or start Docker)"
    log "starting dockerd (log: /tmp/compose-check-dockerd.log)"
    # A daemon killed earlier leaves its pid file behind, and a new one refuses to start.
    pgrep -x dockerd >/dev/null || rm -f /var/run/docker.pid
    setsid dockerd --data-root "${DOCKER_DATA_ROOT:-/var/lib/docker}" \
        >/tmp/compose-check-dockerd.log 2>&1 </dev/null &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break || sleep 1; done
    docker info >/dev/null 2>&1 || fail "dockerd did not start; see /tmp/compose-check-dockerd.log"
fi
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose_cmd=(docker-compose)
else
    fail "neither 'docker compose' nor docker-compose is installed"
fi

# `docker build` with its output in a log, shown only when it fails.
build_image() {
    local tag=$1
    shift
    local output
    output=$(mktemp /tmp/compose-check-build.XXXXXX)
    if ! docker build -t "$tag" "$@" >"$output" 2>&1; then
        tail -40 "$output" >&2
        fail "docker build of $tag failed (whole log: $output)"
    fi
    rm -f "$output"
}

# --- Base images ----------------------------------------------------------------------------
swift_image=swift:6.3-bookworm
runtime_image=debian:bookworm-slim
compose_files=(-f docker-compose.yml)
if docker pull -q "$runtime_image" >/dev/null 2>&1; then
    log "Docker Hub answers: official base images"
    for image in "$swift_image" rabbitmq:3.13-management postgres:15 prom/prometheus:v2.53.0; do
        docker pull -q "$image" >/dev/null
    done
else
    log "Docker Hub does not answer: building stand-in base images from Debian's packages (deploy/offline/)"
    runtime_image=astrosvitla-offline/debian:bookworm
    swift_image=astrosvitla-offline/swift:local
    work=$(mktemp -d /tmp/compose-check.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    if ! docker image inspect "$runtime_image" >/dev/null 2>&1; then
        command -v debootstrap >/dev/null || {
            [ "$(id -u)" = 0 ] || fail "debootstrap is missing (apt-get install debootstrap)"
            apt-get install -y -qq debootstrap >/dev/null
        }
        log "debian bookworm (debootstrap --variant=minbase)"
        debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
            fail "debootstrap failed; see $work/debootstrap.log"
        rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/archives/"*.deb
        tar -C "$work/rootfs" -c . | docker import -c 'CMD ["bash"]' - "$runtime_image" >/dev/null
        rm -rf "$work/rootfs"
    fi
    for service in rabbitmq postgres prometheus; do
        log "$service stand-in"
        build_image "astrosvitla-offline/$service:debian" --build-arg BASE_IMAGE="$runtime_image" \
            -f "deploy/offline/$service.Dockerfile" deploy/offline
    done
    if ! docker image inspect "$swift_image" >/dev/null 2>&1; then
        swift_bin=$(readlink -f "$(command -v swift)") || fail "no Swift toolchain on this machine to build with"
        toolchain=$(dirname "$(dirname "$swift_bin")")
        log "Swift build image from this machine's toolchain ($toolchain)"
        mkdir -p "$work/swift/extra/etc"
        # Hard links when the toolchain is on the same file system: the context is gigabytes.
        cp -al "$toolchain" "$work/swift/toolchain" 2>/dev/null || cp -a "$toolchain" "$work/swift/toolchain"
        : >"$work/swift/extra/etc/gitconfig"
        while read -r key value; do
            mirror=${key#url.}
            mirror=${mirror%.insteadof}
            [ -d "$mirror" ] || continue
            mkdir -p "$work/swift/extra$(dirname "$mirror")"
            [ -e "$work/swift/extra$mirror" ] || cp -a "$mirror" "$work/swift/extra$mirror"
            git config -f "$work/swift/extra/etc/gitconfig" --add "url.$mirror.insteadOf" "$value"
        done < <(git config --get-regexp '^url\..*\.insteadof$' || true)
        cp deploy/offline/swift.Dockerfile "$work/swift/Dockerfile"
        build_image "$swift_image" --build-arg BASE_IMAGE="$runtime_image" "$work/swift"
        rm -rf "$work/swift"
    fi
    compose_files+=(-f deploy/offline/compose.offline.yml)
fi
compose() { "${compose_cmd[@]}" -p "$project" "${compose_files[@]}" "$@"; }

# --- The image ------------------------------------------------------------------------------
log "docker build -f deploy/Dockerfile -t astrosvitla-backend:latest . (SWIFT_IMAGE=$swift_image RUNTIME_IMAGE=$runtime_image)"
started=$(date +%s)
build_image astrosvitla-backend:latest --build-arg SWIFT_IMAGE="$swift_image" \
    --build-arg RUNTIME_IMAGE="$runtime_image" -f deploy/Dockerfile .
echo "    built in $(($(date +%s) - started)) s, $(docker image inspect -f '{{.Size}}' astrosvitla-backend:latest | awk '{printf "%.0f MB", $1 / 1e6}')"

# --- The stack ------------------------------------------------------------------------------
mkdir -p secrets
cleanup() {
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    if [ -n "${work:-}" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
log "compose up -d --scale chart-worker=$scale"
compose up -d --no-build --scale chart-worker="$scale" 2>&1 | sed 's/^/    /'

health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$1"; }
running_services() { compose ps -q | while read -r id; do [ -n "$id" ] && echo "$id"; done; }
deadline=$(($(date +%s) + 240))
while :; do
    unhealthy=0
    for id in $(running_services); do
        case "$(docker inspect -f '{{.Name}}' "$id")" in *migrate*) continue ;; esac
        [ "$(health "$id")" = healthy ] || unhealthy=$((unhealthy + 1))
    done
    [ "$unhealthy" = 0 ] && break
    [ "$(date +%s)" -lt "$deadline" ] || {
        compose ps
        fail "$unhealthy containers not healthy after 240 s"
    }
    sleep 3
done
migrate=$(compose ps -q migrate)
[ "$(docker inspect -f '{{.State.ExitCode}}' "$migrate")" = 0 ] || fail "migrate did not exit 0"
compose ps | sed 's/^/    /'

# Prometheus: one `up` target per worker replica, the gateway and the broker's exporter. Its API
# is read from inside its container (wget is in both the official and the stand-in image).
log "Prometheus scrapes every worker, the gateway and the broker"
prometheus_targets() {
    compose exec -T prometheus wget -q -O - 'http://127.0.0.1:9090/api/v1/targets?state=active' |
        python3 -c '
import json, sys
for target in json.load(sys.stdin)["data"]["activeTargets"]:
    print(target["labels"].get("service", "?"), target["health"], target["scrapeUrl"])'
}
expected_targets=$((scale + 3 + 1 + 1))
deadline=$(($(date +%s) + 90))
while :; do
    targets=$(prometheus_targets 2>/dev/null || true)
    up=$(printf '%s\n' "$targets" | awk '$2 == "up"' | wc -l)
    [ "$up" -ge "$expected_targets" ] && ! printf '%s\n' "$targets" | awk '$2 != "up"' | grep -q . && break
    [ "$(date +%s)" -lt "$deadline" ] || {
        printf '%s\n' "$targets" | sed 's/^/    /'
        fail "Prometheus has $up targets up, expected $expected_targets all up"
    }
    sleep 3
done
printf '%s\n' "$targets" | sed 's/^/    /'
for service in chart-worker billing-worker report-worker story-worker gateway rabbitmq; do
    printf '%s\n' "$targets" | awk -v s="$service" '$1 == s && $2 == "up"' | grep -q . ||
        fail "Prometheus does not scrape $service"
done
[ "$(printf '%s\n' "$targets" | awk '$1 == "chart-worker" && $2 == "up"' | wc -l)" = "$scale" ] ||
    fail "Prometheus does not scrape all $scale chart-workers"

consumers=$(compose exec -T rabbitmq rabbitmqctl -q list_queues name consumers | awk '$1 == "chart.calculate" { print $2 }')
echo "    chart.calculate consumers: $consumers"
[ "$consumers" = "$scale" ] || fail "chart.calculate has $consumers consumers, expected $scale"

# astroctl publishes as the client user (the workers' own broker users may not publish jobs
# people ask for), with the database role of the container it runs in.
client_url="amqp://astro-client:${CLIENT_AMQP_PASSWORD:-astro-client-dev}@rabbitmq:5672/%2F"
astroctl() { compose run --rm -T -e AMQP_URL="$client_url" --entrypoint /app/astroctl chart-worker "$@"; }
user=$(cat /proc/sys/kernel/random/uuid)
log "a chart through the stack (astroctl chart --publish --wait)"
astroctl chart --publish --wait --user "$user" --name "Compose check" --date 1990-10-07 --time 15:00 \
    --tz Europe/Kyiv --lat 50.4501 --lon 30.5234 2>/dev/null | sed -n '1,5p;/^Sun /p' | sed 's/^/    /'

metric() {
    docker exec "$1" bash -c "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3" |
        awk -F' ' '/^astro_jobs_total\{.*queue="chart.calculate".*outcome="succeeded"/ { n += $2 } END { print n + 0 }'
}
total_succeeded() {
    local sum=0
    for id in $(compose ps -q chart-worker); do sum=$((sum + $(metric "$id"))); done
    echo "$sum"
}
before=$(total_succeeded)
log "$jobs chart jobs published at once"
compose run --rm -T -e AMQP_URL="$client_url" --entrypoint bash chart-worker -c "
    for i in \$(seq 1 $jobs); do
        /app/astroctl chart --publish --user $user --name \"Burst \$i\" --date 1990-10-07 --time 15:00 \
            --tz Europe/Kyiv --lat 50.4501 --lon 30.5234 >/dev/null || exit 1
    done" 2>/dev/null
deadline=$(($(date +%s) + 120))
until [ "$(($(total_succeeded) - before))" -ge "$jobs" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "only $(($(total_succeeded) - before)) of $jobs jobs succeeded in 120 s"
    sleep 2
done
for id in $(compose ps -q chart-worker); do
    count=$(metric "$id")
    echo "    $(docker inspect -f '{{.Name}}' "$id" | tr -d /): $count chart jobs succeeded"
    [ "$count" -gt 0 ] || fail "a chart-worker took no job"
done

log "a story written and illustrated by the story-worker, pictures in the named volume"
story=$(compose run --rm -T -e AMQP_URL="$client_url" --entrypoint /app/astroctl story-worker stories generate --user "$user" --child Mia \
    --tz Europe/Kyiv --hero "Felix the Fox" --theme courage --age 0 --pages 3 --wait 2>/dev/null |
    awk '$1 == "story" { print $2; exit }')
[ -n "$story" ] || fail "no story id from astroctl stories generate"
compose run --rm -T -e AMQP_URL="$client_url" --entrypoint /app/astroctl story-worker stories illustrate "$story" --wait >/dev/null 2>&1 ||
    fail "illustrating story $story failed"
compose exec -T story-worker bash -c "ls -ln /var/lib/astrosvitla/stories/$story" | sed 's/^/    /'
owners=$(compose exec -T story-worker bash -c "stat -c %u /var/lib/astrosvitla/stories/$story/*" | sort -u)
[ "$owners" = 10001 ] || fail "pictures owned by uid $owners, expected 10001"

log "a chart-worker killed with SIGKILL comes back (restart: unless-stopped)"
victim=$(compose ps -q chart-worker | head -1)
kill -9 "$(docker inspect -f '{{.State.Pid}}' "$victim")"
deadline=$(($(date +%s) + 90))
until [ "$(docker inspect -f '{{.RestartCount}}' "$victim")" -ge 1 ] && [ "$(health "$victim")" = healthy ]; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "the killed chart-worker was not healthy again within 90 s"
    sleep 2
done
echo "    $(docker inspect -f '{{.Name}}' "$victim" | tr -d /): restarted $(docker inspect -f '{{.RestartCount}}' "$victim") time(s), healthy"

log "scale down to one chart-worker"
compose up -d --no-build --scale chart-worker=1 2>&1 | sed 's/^/    /'
[ "$(compose ps -q chart-worker | wc -l)" = 1 ] || fail "scaling down left $(compose ps -q chart-worker | wc -l) chart-workers"

log "compose down -v"
cleanup
trap - EXIT
echo "compose-check: all checks passed"
