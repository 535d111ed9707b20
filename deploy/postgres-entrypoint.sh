#!/bin/sh
# PostgreSQL for the planner (deploy/postgres.Containerfile): on the first start (an empty volume) create the cluster
# and the role and database `planner` with POSTGRES_PASSWORD (scram-sha-256 over TCP; the superuser only through the
# socket inside the container), then run the server in the foreground. A command instead runs alone, e.g.
# `pg_dump -h /tmp -Fc planner` for a backup.
set -eu
case "${1:-}" in "") ;; *) exec "$@" ;; esac
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD: the password of the role planner, which the replicas use in APP_DB_URL}"
    initdb --pgdata "$PGDATA" --username postgres --encoding UTF8 --locale C.UTF-8 \
        --auth-local peer --auth-host scram-sha-256
    pg_ctl --pgdata "$PGDATA" --wait --options "-c listen_addresses='' -c unix_socket_directories=/tmp" start
    psql --host /tmp --username postgres --dbname postgres --set ON_ERROR_STOP=1 --set pw="$POSTGRES_PASSWORD" <<'SQL'
CREATE ROLE planner LOGIN PASSWORD :'pw';
CREATE DATABASE planner OWNER planner;
SQL
    pg_ctl --pgdata "$PGDATA" --wait stop
fi
exec postgres -D "$PGDATA" -c listen_addresses="${POSTGRES_LISTEN:-127.0.0.1}" -c port="${POSTGRES_PORT:-5432}" \
    -c unix_socket_directories=/tmp -c max_connections="${POSTGRES_MAX_CONNECTIONS:-100}"
