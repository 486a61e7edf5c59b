#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what it needs into .venv,
# starts local PostgreSQL / RabbitMQ / MariaDB if they are installed but stopped, runs pytest.
# Extra arguments go to pytest (e.g. scripts/test.sh -k codecs); with none, the modules that go
# through the compiled codec run a second time in pure-Python mode.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/venv.sh
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
# The hot modules compiled by mypyc (mypy is a test dependency; pip's isolated build has none), in place, into
# streamer/_compiled: cached in ~/.cache/streamer/mypyc by the sources' hash, so only a change recompiles. Optional as
# at install: if it fails the main pass runs interpreted, and tests/util/test_compiled.py fails in CI.
.venv/bin/python setup.py -q build_ext --inplace 2>&1 | grep -v -e '^gcc ' -e 'BetaConfiguration' -e 'warnings.warn' >&2 || true
echo "test.sh: $(.venv/bin/python -m streamer --version)"

# tmux drives the terminal tests of `streamer status --watch` (tests/status/test_status_watch.py)
if ! command -v tmux >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing tmux"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq tmux >/dev/null || true
  elif command -v sudo >/dev/null 2>&1; then sudo apt-get update -qq && sudo apt-get install -y -qq tmux >/dev/null || true
  fi
fi

port_open() { .venv/bin/python -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1)" "$1" 2>/dev/null; }
wait_port() { for _ in $(seq 1 "$2"); do port_open "$1" && return 0; sleep 1; done; return 1; }

if ! port_open 5432 && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "test.sh: starting PostgreSQL"
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  wait_port 5432 30 || echo "test.sh: PostgreSQL did not come up" >&2
fi
if ! port_open 5672 && command -v rabbitmq-server >/dev/null 2>&1; then
  echo "test.sh: starting RabbitMQ"
  rabbitmq-server -detached || true
  wait_port 5672 90 || echo "test.sh: RabbitMQ did not come up" >&2
fi

# MariaDB (mysql:// endpoint tests): install when missing, start when stopped; root logs in over TCP
# without a password as on Debian's test machines (tests use random database names).
if ! port_open 3306; then
  if ! command -v mariadbd >/dev/null 2>&1 && ! command -v mysqld >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
      && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing mariadb-server"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server) \
      || echo "test.sh: could not install mariadb-server" >&2
  fi
  if [ -x /etc/init.d/mariadb ]; then
    echo "test.sh: starting MariaDB"
    /etc/init.d/mariadb start >/dev/null 2>&1 || true
    wait_port 3306 60 || echo "test.sh: MariaDB did not come up" >&2
  fi
fi
# headless Chromium for the pegasus-dashboard test (tests/monitord/test_dashboard.py), only when missing
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test.sh: installing Debian chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
    || echo "test.sh: could not install chromium" >&2
fi

# npm fetches the dashboard pages' CDN files (tests/support/cdnassets.py) for the same test, only when missing
if ! command -v npm >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "test.sh: installing Debian npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q npm >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q npm >/dev/null; } \
    || echo "test.sh: could not install npm" >&2
fi

# Tests run in parallel (pytest-xdist): most of their time is spent waiting on servers and child processes, so
# more workers than cores pay; STREAMER_TEST_WORKERS=0 runs them in one process.
workers="${STREAMER_TEST_WORKERS:-4}"
parallel=(-n "$workers" --dist worksteal)
[ "$workers" = 0 ] && parallel=(-p no:xdist)
if [ $# -gt 0 ]; then exec .venv/bin/python -m pytest -q "${parallel[@]}" "$@"; fi
.venv/bin/python -m pytest -q "${parallel[@]}"
# The whole suite ran with the compiled codec and the mypyc modules; every module that goes through them (parse, encode, ids,
# monitor, golden, fuzz, load: tests/pure_python_modules.txt, kept complete by tests/events/test_pure_python.py)
# runs again without it, as on a machine with no C compiler (docs/internals/performance.md, "Compiled codec").
echo "test.sh: again in pure-Python mode (STREAMER_PURE_PYTHON=1): $(grep -vc '^#' tests/pure_python_modules.txt) modules"
STREAMER_PURE_PYTHON=1 exec .venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" \
  $(grep -v '^#' tests/pure_python_modules.txt)
