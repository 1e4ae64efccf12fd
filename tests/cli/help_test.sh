#!/usr/bin/env bash
# Every example and tool prints its usage on --help, on stdout, and exits 0.
#
#   help_test.sh PROGRAM...      (meson passes the built examples and tools)
set -uo pipefail
failures=0
for prog in "$@"; do
  name=$(basename "$prog")
  out=$("$prog" --help 2>/tmp/help_test_err.$$)
  rc=$?
  err=$(cat /tmp/help_test_err.$$)
  if [[ $rc != 0 || $out != *[Uu]sage* || -n $err ]]; then
    echo "FAIL: $name --help: exit $rc, stdout: ${out:0:200}, stderr: $err" >&2
    failures=$((failures + 1))
  else
    echo "ok: $name --help"
  fi
done
rm -f /tmp/help_test_err.$$
exit $((failures > 0))
