#!/usr/bin/env bash
# The compiled extensions under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   bash bench/asan.sh [MINUTES]
#
# Builds the C extensions with -fsanitize=address,undefined in a scratch copy
# of streamer/, swaps them in for the checkout's own build (put back at the
# end, whatever happens), and runs under the sanitizer runtimes: the tests that compare
# every compiled path with its Python definition on the whole corpus and on
# generated inputs, the suite's fuzz targets, then bench/fuzz.py with
# hypothesis for MINUTES (default 2). Any sanitizer report aborts the run.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-2}"
python=.venv/bin/python
[ -x "$python" ] || { echo "asan.sh: run scripts/test.sh first (it makes .venv)" >&2; exit 2; }
work=$(mktemp -d)
repo=$(pwd)
swap() { cp "$1" "$2.asan-tmp" && mv -f "$2.asan-tmp" "$2"; }  # a new inode: running processes keep theirs
restore() {
  if [ -d "$work/orig" ]; then
    for so in $(cd "$work/orig" && find streamer -name '*.so'); do swap "$work/orig/$so" "$repo/$so"; done
  fi
  rm -rf "$work"
}
trap restore EXIT
cp -r streamer setup.py pyproject.toml README.md "$work"/
find "$work/streamer" -name '*.so' -delete
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
(cd "$work" && CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" "$repo/$python" setup.py -q build_ext --inplace) \
  2>&1 | grep -v "^WARNING\|warnings.warn\|BetaConfiguration" || true
built=$(find "$work/streamer" -name '*.so' | wc -l)
[ "$built" -ge 1 ] || { echo "asan.sh: the sanitized codec did not build" >&2; exit 1; }
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$work/orig"
for so in $(cd "$work" && find streamer -name '*.so'); do
  if [ -f "$so" ]; then mkdir -p "$work/orig/$(dirname "$so")" && cp "$so" "$work/orig/$so"; fi
  swap "$work/$so" "$so"
done
nm -D streamer/events/_codec*.so | grep -q __asan_ || { echo "asan.sh: the swapped-in build is not sanitized" >&2; exit 1; }
"$python" -m pytest -q -p no:cacheprovider tests/events/test_bpfast.py tests/events/test_jsonfast.py \
  tests/events/test_ids.py tests/monitor/test_yamlsub.py tests/events/test_codecs.py tests/monitor/test_fuzz.py \
  tests/monitor/test_hostile_input.py -k "not postgres"
"$python" bench/fuzz.py --minutes "$minutes" --engine hypothesis
echo "asan.sh: no sanitizer report"
