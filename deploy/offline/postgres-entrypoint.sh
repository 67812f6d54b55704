#!/bin/bash
# The official postgres image's first-start behaviour that docker-compose.yml relies on: a new
# data folder is initialised with POSTGRES_USER (the superuser, password POSTGRES_PASSWORD) and
# POSTGRES_DB; other containers log in with a password; then the server runs in the foreground.
set -euo pipefail
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}"
chown -R postgres:postgres "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    printf '%s' "$POSTGRES_PASSWORD" > /tmp/pwfile
    chown postgres /tmp/pwfile
    runuser -u postgres -- initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile=/tmp/pwfile \
        --auth-local=trust --auth-host=scram-sha-256
    rm -f /tmp/pwfile
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    runuser -u postgres -- pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [ "$POSTGRES_DB" != "postgres" ]; then
        runuser -u postgres -- psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres \
            -c "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    runuser -u postgres -- pg_ctl -D "$PGDATA" -m fast -w stop
fi
exec runuser -u postgres -- postgres -D "$PGDATA" -c listen_addresses='*'
