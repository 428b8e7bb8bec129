#!/usr/bin/env bash
# Provisions the local PostgreSQL server the memory-postgres tests run against, idempotently:
# installs Debian's server package when no server binary is present (root only), starts the cluster,
# makes it listen on loopback only, creates the role `memory` and the database `memory_test`, and prints
# the connection URL on stdout (everything else goes to stderr), so callers can do
#   export MEMORY_TEST_POSTGRES_URL="$(bash scripts/postgres-setup.sh)"
set -euo pipefail

ROLE=memory
PASSWORD=memory-test-password
DATABASE=memory_test
PORT="${MEMORY_POSTGRES_PORT:-5432}"

log() { echo "postgres-setup: $*" >&2; }

server_binary() { compgen -G "/usr/lib/postgresql/*/bin/postgres" | sort -V | tail -n 1; }

if [ -z "$(server_binary || true)" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        log "no PostgreSQL server is installed and this is not root: install the 'postgresql' package"
        exit 1
    fi
    log "installing the postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The newest installed cluster; create one when the package left none.
cluster_line="$(pg_lsclusters --no-header 2>/dev/null | sort -V -k1,1 | tail -n 1 || true)"
if [ -z "$cluster_line" ]; then
    version="$(basename "$(dirname "$(dirname "$(server_binary)")")")"
    log "creating cluster $version/main"
    pg_createcluster "$version" main --port "$PORT" >&2
    cluster_line="$(pg_lsclusters --no-header | sort -V -k1,1 | tail -n 1)"
fi
read -r version cluster port status _ <<<"$cluster_line"

# Loopback only: the tests need nothing else, and nothing else should reach a test database.
conf="/etc/postgresql/$version/$cluster/postgresql.conf"
if [ -w "$conf" ] && ! grep -q "^listen_addresses = '127.0.0.1'" "$conf"; then
    echo "listen_addresses = '127.0.0.1'" >>"$conf"
    if [ "$status" = online ]; then
        pg_ctlcluster "$version" "$cluster" restart >&2
    fi
fi
if [ "$status" != online ]; then
    log "starting cluster $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start >&2
fi
for _ in $(seq 1 50); do
    if as_postgres psql -p "$port" -Atqc "SELECT 1" >/dev/null 2>&1; then break; fi
    sleep 0.2
done

as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -Atq >&2 <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$ROLE') THEN
        CREATE ROLE $ROLE LOGIN PASSWORD '$PASSWORD';
    ELSE
        ALTER ROLE $ROLE LOGIN PASSWORD '$PASSWORD';
    END IF;
END
\$\$;
SQL
if ! as_postgres psql -p "$port" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'" | grep -q 1; then
    as_postgres createdb -p "$port" -O "$ROLE" "$DATABASE" >&2
fi
# Tests create and drop their own schemas (and the kill test ends the role's own backends).
as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -Atq -d "$DATABASE" \
    -c "GRANT CREATE ON DATABASE $DATABASE TO $ROLE; GRANT pg_signal_backend TO $ROLE;" >&2

echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$port/$DATABASE"
