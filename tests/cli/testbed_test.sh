#!/usr/bin/env bash
# scripts/testbed and scripts/demo from a cold start, on free ports in a fresh
# state folder (never the user's testbed):
#   - `up` leaves brand-new nodes ready to vote, so examples/basic (expiry
#     10 s, waiting at most 5 s) and examples/std_lock succeed first time;
#   - the examples and the redsync tool find the nodes from
#     REDSYNC_TESTBED_PORT alone, and from `scripts/testbed env`;
#   - scripts/demo refuses a testbed that already runs on its ports and
#     leaves it running;
#   - `env` of a testbed that is down says so and fails;
#   - `up --cluster` forms a member with redis-cli --cluster create
#     (masters and replicas), prints REDSYNC_NODES, and serves `redsync lock`;
#     examples/basic accepts that REDSYNC_NODES (one member, six seeds).
#
#   testbed_test.sh REPO BUILD_DIR     (meson passes both; see meson.build)
set -uo pipefail

REPO=$1
BUILD=$2
TESTBED=$REPO/scripts/testbed
export REDSYNC_CLI=$BUILD/tools/redsync
export REDSYNC_TESTBED_DIR
REDSYNC_TESTBED_DIR=$(mktemp -d "${TMPDIR:-/tmp}/redsync-testbed-test.XXXXXX")
unset REDSYNC_NODES REDSYNC_RESTART_GUARD REDSYNC_TESTBED_NODES REDSYNC_TESTBED_GUARD
failures=0

cleanup() {
  "$TESTBED" down >/dev/null 2>&1 || true
  rm -rf "$REDSYNC_TESTBED_DIR"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# check DESCRIPTION COMMAND...: the command must succeed.
check() {
  local what=$1
  shift
  "$@" || fail "$what"
}

port_free() { ! timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# Five free ports in a row, away from the default 7001 and below the
# ephemeral range (outgoing connections take ports from 32768 up).
find_ports() {
  local try base i ok
  for ((try = 0; try < 50; try++)); do
    base=$((10000 + RANDOM % 20000))
    ok=1
    for ((i = 0; i < 5; i++)); do port_free $((base + i)) || ok=0; done
    ((ok)) && { echo "$base"; return 0; }
  done
  return 1
}

# ---- a cold start: up, then the README's example must work first time ----------
# A port found free may be taken before redis-server binds it (tests run in
# parallel): then the testbed starts over on other ports.
export REDSYNC_TESTBED_PORT
for ((attempt = 1; ; attempt++)); do
  REDSYNC_TESTBED_PORT=$(find_ports) || { echo "FAIL: no free ports" >&2; exit 1; }
  echo "testbed on ports $REDSYNC_TESTBED_PORT.., state in $REDSYNC_TESTBED_DIR"
  up_out=$("$TESTBED" up 2>&1)
  up_rc=$?
  echo "$up_out"
  [[ $up_rc == 0 ]] && break
  "$TESTBED" down >/dev/null 2>&1
  if ((attempt == 3)) || [[ $up_out != *"Address already in use"* && $up_out != *"in use by a process"* ]]; then
    echo "FAIL: testbed up exited $up_rc" >&2
    exit 1
  fi
done
[[ $up_out == *"ready: all 5 nodes vote"* ]] || fail "up did not report the nodes ready"

basic_out=$("$BUILD/examples/basic" 2>&1)
basic_rc=$?
[[ $basic_rc == 0 ]] || fail "basic right after a cold 'up' (REDSYNC_TESTBED_PORT only) exited $basic_rc: $basic_out"
std_out=$("$BUILD/examples/std_lock" 2>&1)
[[ $? == 0 ]] || fail "std_lock right after a cold 'up' failed: $std_out"

# ---- the tool follows REDSYNC_TESTBED_PORT --------------------------------------------
ping_out=$("$REDSYNC_CLI" ping 2>&1)
ping_rc=$?
[[ $ping_rc == 0 && $ping_out == *"127.0.0.1:$REDSYNC_TESTBED_PORT: up"* && $ping_out == *"5/5 nodes up, 5/5 voting"* ]] ||
  fail "redsync ping with REDSYNC_TESTBED_PORT=$REDSYNC_TESTBED_PORT (rc $ping_rc): $ping_out"
bad_out=$(REDSYNC_TESTBED_PORT=seven "$REDSYNC_CLI" ping 2>&1)
[[ $? == 64 && $bad_out == *'REDSYNC_TESTBED_PORT: invalid number "seven"'* ]] ||
  fail "a bad REDSYNC_TESTBED_PORT is not a usage error naming it: $bad_out"

# ---- scripts/testbed env ---------------------------------------------------------------
env_out=$("$TESTBED" env)
want="export REDSYNC_NODES=redis://127.0.0.1:$REDSYNC_TESTBED_PORT"
for ((i = 1; i < 5; i++)); do want+=",redis://127.0.0.1:$((REDSYNC_TESTBED_PORT + i))"; done
[[ $env_out == "$want" ]] || fail "env printed '$env_out', expected '$want'"
(
  eval "$env_out"
  unset REDSYNC_TESTBED_PORT
  out=$("$BUILD/examples/basic" 2>&1) || { echo "FAIL: basic with REDSYNC_NODES from env: $out" >&2; exit 1; }
  out=$("$REDSYNC_CLI" ping 2>&1) || { echo "FAIL: ping with REDSYNC_NODES from env: $out" >&2; exit 1; }
) || failures=$((failures + 1))

# ---- scripts/demo leaves a running testbed alone -------------------------------------
demo_out=$("$REPO/scripts/demo" 2>&1)
demo_rc=$?
[[ $demo_rc != 0 && $demo_out == *"a testbed is already running on ports $REDSYNC_TESTBED_PORT"* ]] ||
  fail "demo on a running testbed (rc $demo_rc): $demo_out"
check "the testbed still runs after the demo refused it" "$TESTBED" env >/dev/null
[[ $("$REDSYNC_CLI" ping 2>&1) == *"5/5 nodes up"* ]] || fail "nodes gone after the demo refused"

# ---- env of a testbed that is down -------------------------------------------------------
"$TESTBED" down >/dev/null 2>&1 || fail "down"
down_err=$("$TESTBED" env 2>&1 >/dev/null)
[[ $? != 0 && $down_err == *"is not up (0/5 nodes running)"* ]] || fail "env of a stopped testbed: $down_err"

# ---- a cluster testbed: one member, 3 masters + 1 replica each -----------------------
# Formed by redis-cli --cluster create; up returns once every replica's link
# is up, prints REDSYNC_NODES, and the member serves a `redsync lock` run
# (restart guard on: the slot's record is met by the first attempt and votes
# a 1 s window later). Each server's cluster bus listens on its port +
# 10000: ports low enough that the bus ports stay below the ephemeral range
# too, and a retry when one was taken meanwhile.
(
  export REDSYNC_TESTBED_NODES=1
  for ((attempt = 1; ; attempt++)); do
    p=$((10000 + RANDOM % 12000))
    ok=1
    for ((i = 0; i < 6; i++)); do port_free $((p + i)) && port_free $((p + i + 10000)) || ok=0; done
    ((ok)) || continue
    export REDSYNC_TESTBED_PORT=$p
    out=$("$TESTBED" up --cluster --masters 3 --replicas 1 2>&1) && break
    "$TESTBED" down >/dev/null 2>&1
    ((attempt < 3)) || { echo "FAIL: up --cluster: $out" >&2; exit 1; }
  done
  want="redis+cluster://127.0.0.1:$p"
  for ((i = 1; i < 6; i++)); do want+=",127.0.0.1:$((p + i))"; done
  [[ $out == *"REDSYNC_NODES=$want"* ]] || { echo "FAIL: up --cluster did not print REDSYNC_NODES: $out" >&2; exit 1; }
  [[ $("$TESTBED" env) == "export REDSYNC_NODES=$want" ]] ||
    { echo "FAIL: env of a cluster testbed: $("$TESTBED" env)" >&2; exit 1; }
  state=$(timeout 2 redis-cli -p "$((p + 2))" CLUSTER INFO | tr -d '\r' | sed -n 's/^cluster_state://p')
  [[ $state == ok ]] || { echo "FAIL: the cluster testbed's state is '$state'" >&2; exit 1; }
  for ((i = 3; i < 6; i++)); do
    link=$(timeout 2 redis-cli -p "$((p + i))" INFO replication | tr -d '\r' | sed -n 's/^master_link_status://p')
    [[ $link == up ]] || { echo "FAIL: replica on port $((p + i)): master link '$link'" >&2; exit 1; }
  done
  lock_out=$(REDSYNC_NODES=$want "$REDSYNC_CLI" lock --ttl 1s --wait 30s testbed-test:cluster -- echo held 2>&1)
  [[ $? == 0 && $lock_out == *held* ]] || { echo "FAIL: redsync lock on the cluster testbed: $lock_out" >&2; exit 1; }
  # The examples read the same REDSYNC_NODES (issue 33: they split it at
  # every comma and refused "127.0.0.1:P": missing scheme). basic's slot
  # is new to the member, and its expiry (10 s) is longer than its wait
  # (5 s): it locks at once only because a slot no lock used votes at once
  # (issue 32: it cost a whole guard window, and basic failed).
  basic_out=$(REDSYNC_NODES=$want timeout 60 "$BUILD/examples/basic" 2>&1)
  basic_rc=$?
  [[ $basic_rc == 0 ]] ||
    { echo "FAIL: examples/basic with the cluster testbed's REDSYNC_NODES (rc $basic_rc): $basic_out" >&2; exit 1; }
  echo "examples/basic on the cluster testbed: rc $basic_rc ${basic_out:0:300}"
  "$TESTBED" down >/dev/null 2>&1 || { echo "FAIL: down of a cluster testbed" >&2; exit 1; }
  ! "$TESTBED" env >/dev/null 2>&1 || { echo "FAIL: env after down of a cluster testbed" >&2; exit 1; }
) || failures=$((failures + 1))

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
