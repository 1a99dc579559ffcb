#!/usr/bin/env bash
# System packages the test suite needs beyond PyPI (run by `make test`, as root on Debian).
# Idempotent: installs only what is missing, so a developer's second `make test` costs nothing here.
set -euo pipefail

missing=()
need() {  # need COMMAND-OR-PATH PACKAGE...
  local probe=$1; shift
  if [[ $probe == /* ]]; then [[ -e $probe ]] && return 0; else command -v "$probe" >/dev/null 2>&1 && return 0; fi
  missing+=("$@")
}

# (entries are added by the features whose tests need them)
# tests/integration/test_real_mediawiki.py: a real MediaWiki on SQLite, served by `php -S`.
need /usr/share/mediawiki/maintenance/install.php mediawiki
need php php-cli
php -m 2>/dev/null | grep -qx pdo_sqlite || missing+=(php-sqlite3)
need chromium chromium
# tests/integration/test_postgres_*.py, tests/e2e/test_replicas.py and the Aegra deployments of the security tests:
# a throwaway PostgreSQL 15 cluster (initdb/pg_ctl on loopback) and Redis, started by the tests themselves.
need /usr/lib/postgresql/15/bin/initdb postgresql
need redis-server redis-server
# tests/e2e/test_replicas.py: deploy/nginx.conf, the compose file's reverse proxy, in front of the replicas.
need nginx nginx-light
# Playwright's bundled Node.js driver links libatomic, which a minimal Debian (no gcc) lacks.
ldconfig -p 2>/dev/null | grep -q 'libatomic\.so\.1 ' || missing+=(libatomic1)

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "test-deps: missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  echo "test-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
