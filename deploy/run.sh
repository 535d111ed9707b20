#!/bin/sh
# The planner as several replicas (README "Deployment", "Several replicas"): one PostgreSQL, two replicas of the
# planner image on it (each serving the web app and the HTTP API), and HAProxy in front with sticky sessions, all
# with podman (or docker: PODMAN=docker) on this host's network, every part but the proxy on 127.0.0.1.
#
#   POSTGRES_PASSWORD=... sh deploy/run.sh up     # build the proxy and PostgreSQL images, start the four containers
#   sh deploy/run.sh down                         # remove the containers; the database volume stays
#
# Settings (environment variables, defaults in brackets):
#   PLANNER_IMAGE [localhost/planner]    the planner image, built from the repository's Dockerfile
#   NAME [planner]                       containers NAME-postgres, NAME-1, NAME-2, NAME-proxy; volume NAME-pgdata
#   PROXY_BIND [127.0.0.1:8080]          where users (or your sign-on proxy) reach the planner
#   APP_PORT_1, APP_PORT_2 [8501, 8502]  each replica's web app, on 127.0.0.1
#   API_PORT_1, API_PORT_2 [8001, 8002]  each replica's HTTP API, on 127.0.0.1
#   POSTGRES_PORT [5432]                 PostgreSQL, on 127.0.0.1
#   POSTGRES_PASSWORD (for up)           the password of the database role `planner`, set on the first start
#   PLANNER_ENV_FILE                     a file of further planner settings (NAME=value lines: APP_TITLE, ...)
#   RESTART [on-failure]                 the containers' restart policy
#   PROXY_IMAGE, POSTGRES_IMAGE [localhost/planner-proxy, localhost/planner-postgres]   the images built here
#   PODMAN [podman], BUILD_OPTIONS []    the container tool and extra `build` options
set -eu
cd "$(dirname "$0")"
PODMAN=${PODMAN:-podman}
NAME=${NAME:-planner}
PLANNER_IMAGE=${PLANNER_IMAGE:-localhost/planner}
PROXY_IMAGE=${PROXY_IMAGE:-localhost/planner-proxy}
POSTGRES_IMAGE=${POSTGRES_IMAGE:-localhost/planner-postgres}
PROXY_BIND=${PROXY_BIND:-127.0.0.1:8080}
APP_PORT_1=${APP_PORT_1:-8501} APP_PORT_2=${APP_PORT_2:-8502}
API_PORT_1=${API_PORT_1:-8001} API_PORT_2=${API_PORT_2:-8002}
POSTGRES_PORT=${POSTGRES_PORT:-5432}
RESTART=${RESTART:-on-failure}
START_TIMEOUT_S=180

# wait until `$@` succeeds, at most START_TIMEOUT_S seconds; else show the container's log and fail
wait_for() {
    what=$1 container=$2; shift 2
    waited=0
    until "$@" >/dev/null 2>&1; do
        if [ "$($PODMAN inspect --format '{{.State.Running}}' "$container")" != true ] \
           || [ "$waited" -ge "$START_TIMEOUT_S" ]; then
            $PODMAN logs --tail 40 "$container" >&2
            echo "$what did not come up" >&2
            exit 1
        fi
        sleep 1; waited=$((waited + 1))
    done
    echo "$what is up ($waited s)"
}

replica() {     # replica N APP_PORT API_PORT
    $PODMAN run --detach --name "$NAME-$1" --network host --restart "$RESTART" \
        ${PLANNER_ENV_FILE:+--env-file "$PLANNER_ENV_FILE"} \
        --env APP_DB_URL="postgresql://planner:$POSTGRES_PASSWORD@127.0.0.1:$POSTGRES_PORT/planner" \
        --env STREAMLIT_SERVER_ADDRESS=127.0.0.1 --env STREAMLIT_SERVER_PORT="$2" \
        --env APP_API_HOST=127.0.0.1 --env APP_API_PORT="$3" \
        "$PLANNER_IMAGE" >/dev/null
    wait_for "replica $1 (web app on 127.0.0.1:$2, API on 127.0.0.1:$3)" "$NAME-$1" \
        $PODMAN exec "$NAME-$1" python scripts/healthcheck.py
}

case "${1:-}" in
up)
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (the database role planner's password)}"
    $PODMAN build ${BUILD_OPTIONS:-} --tag "$PROXY_IMAGE" --file proxy.Containerfile .
    $PODMAN build ${BUILD_OPTIONS:-} --tag "$POSTGRES_IMAGE" --file postgres.Containerfile .
    $PODMAN run --detach --name "$NAME-postgres" --network host --restart "$RESTART" \
        --volume "$NAME-pgdata:/var/lib/postgresql/data" \
        --env POSTGRES_PASSWORD --env POSTGRES_PORT="$POSTGRES_PORT" "$POSTGRES_IMAGE" >/dev/null
    wait_for "PostgreSQL on 127.0.0.1:$POSTGRES_PORT" "$NAME-postgres" \
        $PODMAN exec "$NAME-postgres" pg_isready --host /tmp --port "$POSTGRES_PORT" --dbname planner
    # one after the other: the first creates, migrates and seeds the store, the second finds it ready
    replica 1 "$APP_PORT_1" "$API_PORT_1"
    replica 2 "$APP_PORT_2" "$API_PORT_2"
    $PODMAN run --detach --name "$NAME-proxy" --network host --restart "$RESTART" \
        --env PROXY_BIND="$PROXY_BIND" \
        --env REPLICA1_APP="127.0.0.1:$APP_PORT_1" --env REPLICA2_APP="127.0.0.1:$APP_PORT_2" \
        --env REPLICA1_API="127.0.0.1:$API_PORT_1" --env REPLICA2_API="127.0.0.1:$API_PORT_2" \
        "$PROXY_IMAGE" >/dev/null
    host=${PROXY_BIND%:*}; case "$host" in ""|0.0.0.0|"*"|"[::]") host=127.0.0.1 ;; esac
    wait_for "the proxy on $PROXY_BIND" "$NAME-proxy" $PODMAN exec "$NAME-1" python -c \
        "import urllib.request as u; assert u.urlopen('http://$host:${PROXY_BIND##*:}/_stcore/health').read() == b'ok'"
    ;;
down)
    for part in proxy 1 2 postgres; do
        $PODMAN rm --force --volumes --time 10 "$NAME-$part" >/dev/null 2>&1 || true
    done
    echo "removed the containers of $NAME; the database stays on the volume $NAME-pgdata"
    ;;
*)
    sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
