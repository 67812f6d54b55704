# A stand-in for the official postgres:15 image, for machines that cannot pull from Docker Hub
# (scripts/compose-check.sh builds it only then). Debian 12's postgresql-15 with the part of the
# official entrypoint docker-compose.yml relies on: POSTGRES_USER, POSTGRES_PASSWORD and
# POSTGRES_DB on first start, data in /var/lib/postgresql/data, password (SCRAM) logins from
# other containers, pg_isready on the PATH.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
