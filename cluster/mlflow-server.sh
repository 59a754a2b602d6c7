#!/usr/bin/env bash
# Start / stop an MLflow tracking server backed by PostgreSQL, with a proxied artifact store.
#
# Usage:
#   MLFLOW_DB_PASSWORD=... cluster/mlflow-server.sh start     # background; PID file + log in the state dir
#   cluster/mlflow-server.sh status
#   cluster/mlflow-server.sh stop                              # SIGTERM to the server's process group, then SIGKILL
#
# Then point privlab at it:  privlab run SPEC --tracking-uri http://127.0.0.1:5000
#
# Environment:
#   MLFLOW_DB_USER / MLFLOW_DB_PASSWORD / MLFLOW_DB_HOST / MLFLOW_DB_PORT / MLFLOW_DB_NAME
#       build the backend store URI postgresql+psycopg2://USER:PASS@HOST:PORT/DB (psycopg 3's
#       postgresql+psycopg:// if only that driver is installed)
#       (defaults: mlflow / required / 127.0.0.1 / 5432 / mlflow; create them with
#       cluster/mlflow-postgres-setup.sh). The password is percent-encoded, so any character is fine.
#   MLFLOW_BACKEND_STORE_URI   use this URI as is instead (any SQLAlchemy URI).
#   MLFLOW_ARTIFACTS_DESTINATION
#       where artifacts are stored; clients upload through the server (--serve-artifacts), so they
#       need no storage credentials. Default: ./mlflow-artifacts (made absolute). Object storage:
#         MLFLOW_ARTIFACTS_DESTINATION=s3://my-bucket/mlflow   (needs boto3 on the server and the usual
#         AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an instance role; MLFLOW_S3_ENDPOINT_URL for MinIO)
#         MLFLOW_ARTIFACTS_DESTINATION=gs://my-bucket/mlflow   (google-cloud-storage)
#   MLFLOW_SERVER_HOST  interface to bind. Default 127.0.0.1 (this machine only). Binding anything else
#                       exposes an unauthenticated server: do it deliberately, behind a firewall or an
#                       authenticating proxy, and set MLFLOW_SERVER_ALLOWED_HOSTS to the names clients use.
#                       (Not the bare HOST variable: zsh and many platforms set HOST to the hostname.)
#   MLFLOW_SERVER_PORT  port (default 5000).
#   MLFLOW_SERVER_ALLOWED_HOSTS  passed to --allowed-hosts when set.
#   MLFLOW_SERVER_STATE_DIR      PID file and log (default ./.mlflow-server).
#   PYTHON              the interpreter whose environment has mlflow and psycopg2
#                       (default: $VIRTUAL_ENV/bin/python, else python3). psycopg2 is an optional
#                       dependency: pip install -e '.[tracking-server]' (or '.[dev]') on the server machine.
#
# Everything `start` writes, and everything the server writes (artifacts included), is the user's
# alone: the server runs with umask 077, and the state folder, the log and a local artifact
# destination are made 0700/0600 even when they already existed.
#
# Settings that matter on small machines (measured): MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false and
# one worker give 2 processes and ~480 MB instead of 13 processes and ~2.5 GB; more uvicorn workers
# added ~45 ms per request on reused connections. SIGTERM alone did not stop the server cleanly, so
# the server runs in its own session and `stop` signals the whole process group.
set -euo pipefail

STATE_DIR=${MLFLOW_SERVER_STATE_DIR:-$PWD/.mlflow-server}
PID_FILE=$STATE_DIR/mlflow-server.pid
LOG_FILE=$STATE_DIR/mlflow-server.log
BIND_HOST=${MLFLOW_SERVER_HOST:-127.0.0.1}
BIND_PORT=${MLFLOW_SERVER_PORT:-5000}
if [ -n "${PYTHON:-}" ]; then :
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PYTHON=$VIRTUAL_ENV/bin/python
else PYTHON=python3
fi

die() { echo "mlflow-server: $*" >&2; exit 1; }

# The PID recorded by `start`, if that process is still our MLflow server (guards against PID reuse).
server_pid() {
    [ -f "$PID_FILE" ] || return 1
    local pid
    pid=$(cat "$PID_FILE")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "mlflow server" || return 1
    [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" = "$pid" ] || return 1
    echo "$pid"
}

group_alive() { [ -n "$(ps -eo pgid= | awk -v g="$1" '$1 == g')" ]; }

cmd_start() {
    if pid=$(server_pid); then die "already running (pid $pid); run '$0 stop' first"; fi
    umask 077  # for what this script creates and for the server, which inherits it
    mkdir -p "$STATE_DIR"
    chmod 700 "$STATE_DIR"
    rm -f "$LOG_FILE"  # recreated 0600 below (an existing file would keep its mode)
    "$PYTHON" -c 'import mlflow' 2>/dev/null || die "$PYTHON cannot import mlflow; set PYTHON to your venv's python"

    if [ -z "${MLFLOW_BACKEND_STORE_URI:-}" ]; then
        [ -n "${MLFLOW_DB_PASSWORD:-}" ] || die "set MLFLOW_DB_PASSWORD (or MLFLOW_BACKEND_STORE_URI)"
        # Name the driver: SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3, not psycopg2.
        local scheme
        if "$PYTHON" -c 'import psycopg2' 2>/dev/null; then scheme=postgresql+psycopg2
        elif "$PYTHON" -c 'import psycopg' 2>/dev/null; then scheme=postgresql+psycopg
        else die "$PYTHON has no PostgreSQL driver; pip install -e '.[tracking-server]' (psycopg2-binary)"
        fi
        local password
        password=$("$PYTHON" -c 'import os, urllib.parse; print(urllib.parse.quote(os.environ["MLFLOW_DB_PASSWORD"], safe=""))')
        # Exported, not passed as --backend-store-uri: the password stays out of `ps` output.
        export MLFLOW_BACKEND_STORE_URI="$scheme://${MLFLOW_DB_USER:-mlflow}:${password}@${MLFLOW_DB_HOST:-127.0.0.1}:${MLFLOW_DB_PORT:-5432}/${MLFLOW_DB_NAME:-mlflow}"
    fi

    local destination=${MLFLOW_ARTIFACTS_DESTINATION:-$PWD/mlflow-artifacts}
    if [[ "$destination" != *://* ]]; then
        mkdir -p "$destination"
        chmod 700 "$destination" || echo "mlflow-server: warning: cannot make $destination private (chmod 700)" >&2
        destination=$(cd "$destination" && pwd)
    fi

    local extra=()
    [ -z "${MLFLOW_SERVER_ALLOWED_HOSTS:-}" ] || extra+=(--allowed-hosts "$MLFLOW_SERVER_ALLOWED_HOSTS")

    # No job runner (it adds ~11 processes and ~2 GB); one worker is plenty for privlab's batched logging.
    export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
    # setsid: the server leads its own process group, which `stop` signals as a whole.
    setsid "$PYTHON" -m mlflow server \
        --host "$BIND_HOST" --port "$BIND_PORT" --workers 1 \
        --serve-artifacts --artifacts-destination "$destination" \
        "${extra[@]}" \
        </dev/null >"$LOG_FILE" 2>&1 &
    local pid=$!
    echo "$pid" >"$PID_FILE"

    local url="http://$BIND_HOST:$BIND_PORT"
    [[ "$BIND_HOST" != *:* ]] || url="http://[$BIND_HOST]:$BIND_PORT"
    [ "$BIND_HOST" != 0.0.0.0 ] || url="http://127.0.0.1:$BIND_PORT"
    for _ in $(seq 1 120); do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 30 "$LOG_FILE" >&2
            rm -f "$PID_FILE"
            die "the server exited while starting (log: $LOG_FILE)"
        fi
        if "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$url" 2>/dev/null; then
            echo "MLflow tracking server at $url (pid $pid, log $LOG_FILE)"
            echo "artifacts: $destination"
            echo "use it:    privlab run SPEC --tracking-uri $url"
            return 0
        fi
        sleep 0.5
    done
    tail -n 30 "$LOG_FILE" >&2
    cmd_stop || true
    die "the server did not answer on $url/health within 60 s (log: $LOG_FILE)"
}

cmd_stop() {
    local pid
    if ! pid=$(server_pid); then
        rm -f "$PID_FILE"
        echo "no MLflow server recorded in $STATE_DIR is running"
        return 0
    fi
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
        group_alive "$pid" || break
        sleep 0.5
    done
    if group_alive "$pid"; then
        echo "mlflow-server: process group $pid ignored SIGTERM; sending SIGKILL" >&2
        kill -KILL -- "-$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$PID_FILE"
    echo "stopped the MLflow server (process group $pid)"
}

cmd_status() {
    local pid
    if pid=$(server_pid); then
        echo "running: pid $pid, processes: $(ps -eo pgid= | awk -v g="$pid" '$1 == g' | wc -l), log $LOG_FILE"
    else
        echo "not running"
        return 1
    fi
}

case "${1:-start}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    -h|--help|help) sed -n '2,42p' "$0" ;;
    *) die "unknown command '$1' (start | stop | status)" ;;
esac
