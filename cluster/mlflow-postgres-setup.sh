#!/usr/bin/env bash
# Create the PostgreSQL role and database that MLflow's tracking server uses as its backend store.
#
# Usage:
#   MLFLOW_DB_PASSWORD=... cluster/mlflow-postgres-setup.sh [create]     # role + database (idempotent)
#   cluster/mlflow-postgres-setup.sh install                              # Debian: apt-get install postgresql, start it
#   cluster/mlflow-postgres-setup.sh instance-start DIR [PORT]            # a private throwaway server on 127.0.0.1
#   cluster/mlflow-postgres-setup.sh instance-stop DIR
#
# `create` talks to the server named by the usual libpq variables (PGHOST, PGPORT; default: the local
# server's unix socket) as its superuser. Run as root it runs psql as the OS user $PG_OS_USER
# (default `postgres`, which Debian's peer authentication maps to the `postgres` superuser); run as
# anyone else it runs psql as you (set PGUSER/PGPASSWORD for a superuser or a role with CREATEDB and
# CREATEROLE). It is idempotent: an existing role gets the password again, an existing database is kept.
#
# Environment (same names as cluster/mlflow-server.sh):
#   MLFLOW_DB_USER      role to create                 (default: mlflow)
#   MLFLOW_DB_PASSWORD  its password                   (required for `create`; never put it on a command line)
#   MLFLOW_DB_NAME      database to create, owned by the role (default: mlflow)
#
# psql takes the password from the environment (\getenv, psql >= 15) and quotes it itself
# (:'password'), so it never appears in `ps` output or in SQL text, and any character is safe.
#
# `instance-start` exists for laptops and tests: it initialises DIR (initdb; peer authentication on
# the unix socket, whose directory only the server's OS user may enter; passwords (scram) over TCP)
# and starts postgres listening on 127.0.0.1 only, with its unix socket in DIR. Then:
#   PGHOST=DIR PGPORT=PORT MLFLOW_DB_PASSWORD=... cluster/mlflow-postgres-setup.sh create
#   MLFLOW_DB_PORT=PORT MLFLOW_DB_PASSWORD=... cluster/mlflow-server.sh start
set -euo pipefail

PG_OS_USER=${PG_OS_USER:-postgres}
DB_USER=${MLFLOW_DB_USER:-mlflow}
DB_NAME=${MLFLOW_DB_NAME:-mlflow}

die() { echo "mlflow-postgres-setup: $*" >&2; exit 1; }

# Run a PostgreSQL client/server binary as the right OS user (postgres refuses to run as root).
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$PG_OS_USER" -- "$@"
    else
        "$@"
    fi
}

pg_bindir() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
        return
    fi
    # Debian keeps the server binaries out of PATH: /usr/lib/postgresql/<major>/bin.
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] || die "PostgreSQL server binaries not found; run '$0 install' (Debian) or install PostgreSQL"
    echo "$dir"
}

cmd_install() {
    [ "$(id -u)" -eq 0 ] || die "install needs root (apt-get)"
    apt-get install -y postgresql
    # Debian's default cluster listens on localhost only (listen_addresses = 'localhost').
    local version
    version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
    pg_ctlcluster "$version" main start || true
    pg_lsclusters
}

cmd_create() {
    [ -n "${MLFLOW_DB_PASSWORD:-}" ] || die "set MLFLOW_DB_PASSWORD (the password of role $DB_USER)"
    # psql reads the password from the environment (\getenv, psql >= 15) and quotes it itself.
    as_pg psql -X -q -v ON_ERROR_STOP=1 -d postgres -v db_user="$DB_USER" -v db_name="$DB_NAME" -f - <<'SQL'
\getenv password MLFLOW_DB_PASSWORD
SELECT format('CREATE ROLE %I LOGIN', :'db_user')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'db_user') \gexec
ALTER ROLE :"db_user" WITH LOGIN PASSWORD :'password';
SELECT format('CREATE DATABASE %I OWNER %I ENCODING ''UTF8'' TEMPLATE template0', :'db_name', :'db_user')
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db_name') \gexec
REVOKE ALL ON DATABASE :"db_name" FROM PUBLIC;
GRANT ALL ON DATABASE :"db_name" TO :"db_user";
-- MLflow's migrations create their tables in the public schema.
\connect :"db_name"
GRANT ALL ON SCHEMA public TO :"db_user";
SQL
    echo "role '$DB_USER' and database '$DB_NAME' are ready"
    echo "backend store: postgresql://$DB_USER:<password>@${MLFLOW_DB_HOST:-127.0.0.1}:${MLFLOW_DB_PORT:-5432}/$DB_NAME"
}

cmd_instance_start() {
    local dir=${1:?usage: $0 instance-start DIR [PORT]} port=${2:-5432} bindir
    bindir=$(pg_bindir)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" -ne 0 ] || chown "$PG_OS_USER" "$dir"
    chmod 0700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        as_pg "$bindir/initdb" -D "$dir/data" --auth-local=peer --auth-host=scram-sha-256 \
            -E UTF8 >"$dir/initdb.log"
    fi
    # listen_addresses=127.0.0.1: TCP on loopback only; the unix socket lives in DIR.
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c unix_socket_permissions=0700" start
    echo "PostgreSQL on 127.0.0.1:$port (socket dir $dir); superuser access: PGHOST=$dir PGPORT=$port $0 create"
}

cmd_instance_stop() {
    local dir=${1:?usage: $0 instance-stop DIR} bindir
    bindir=$(pg_bindir)
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop
}

case "${1:-create}" in
    create) cmd_create ;;
    install) cmd_install ;;
    instance-start) shift; cmd_instance_start "$@" ;;
    instance-stop) shift; cmd_instance_stop "$@" ;;
    -h|--help|help) sed -n '2,28p' "$0" ;;
    *) die "unknown command '$1' (create | install | instance-start DIR [PORT] | instance-stop DIR)" ;;
esac
