# Sourced by demo.sh and test.sh: finds Python >= 3.11 and makes .venv with it.
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$candidate"; break
  fi
done
[ -n "$python" ] || { echo "streamer: Python 3.11 or newer is required" >&2; exit 2; }
[ -x .venv/bin/python ] || "$python" -m venv .venv
