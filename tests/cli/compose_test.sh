#!/usr/bin/env bash
# scripts/check-compose (issue 33): docker-compose.yml passes it, and copies
# broken the ways the cluster profile could break fail it, each naming the
# problem (so the check really looks at what it claims to).
#
#   compose_test.sh REPO     (meson passes it; see meson.build)
set -uo pipefail

REPO=$1
CHECK=$REPO/scripts/check-compose
FILE=$REPO/docker-compose.yml
TMP=$(mktemp -d "${TMPDIR:-/tmp}/redsync-compose-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0

out=$("$CHECK" "$FILE" 2>&1)
[[ $? == 0 ]] || { echo "FAIL: docker-compose.yml does not pass scripts/check-compose:" >&2; echo "$out" >&2; exit 1; }
echo "$out"

# broken DESCRIPTION SED-SCRIPT EXPECTED: the copy edited by SED-SCRIPT must
# change (else the edit no longer applies) and fail with EXPECTED in the output.
broken() {
  local what=$1 script=$2 expected=$3 copy=$TMP/broken.yml out rc
  sed "$script" "$FILE" >"$copy"
  if cmp -s "$FILE" "$copy"; then
    echo "FAIL: $what: the edit '$script' changed nothing (update this test)" >&2
    failures=$((failures + 1))
    return
  fi
  out=$("$CHECK" "$copy" 2>&1)
  rc=$?
  if [[ $rc != 1 || $out != *"$expected"* ]]; then
    echo "FAIL: $what: rc $rc, expected 1 and '$expected' in: $out" >&2
    failures=$((failures + 1))
  fi
}

broken "a create service nobody adopts" \
  's/cluster2-create: {condition: service_completed_successfully}/cluster2-create: {condition: service_started}/' \
  "cluster-ready: does not depend on cluster2-create with service_completed_successfully"
broken "a node on another port than the create service forms" \
  '/cluster3-node4:/,/command:/s/"--port", "7216"/"--port", "7226"/' \
  "cluster3-node4: command does not say --port 7216"
# shellcheck disable=SC2016  # the $ are meant literally
broken "a shell variable compose would substitute" \
  's/redis-cli -p "\$\$p" ping/redis-cli -p "$p" ping/' \
  "cluster1-create: unescaped '\$'"
broken "a create service waiting for the health it brings about" \
  's/cluster1-node2: {condition: service_started}/cluster1-node2: {condition: service_healthy}/' \
  "cluster1-create: waits for cluster1-node2 to be healthy"
broken "a node without its formation healthcheck" \
  "s/grep -q '^cluster_state:ok'/grep -q '^cluster_state'/" \
  "healthcheck does not check cluster_state:ok"
broken "a standalone node on the wrong port" \
  's/127.0.0.1:7003:6379/127.0.0.1:7013:6379/' \
  "redis3: ports"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
