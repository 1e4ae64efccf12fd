#!/usr/bin/env bash
# scripts/testbed keeps its testbed in a state file (issue 33), checked with a
# 5-node standalone testbed (up --no-wait: no restart-guard wait, about a
# second) on free ports in a fresh state folder (never the user's .testbed/):
#   - env, status and down find the testbed from a new shell with no
#     variables but the state folder (env -i);
#   - a second up on other ports is refused, names the running testbed and
#     how to stop it, and starts nothing (the first testbed's servers keep
#     their pids; nothing listens on the other ports);
#   - up with the same settings says "already up" and starts nothing;
#   - env with a node killed (and one paused) still exports the whole list
#     and names those nodes on stderr;
#   - down stops every server it started, removes the state file, and then
#     env says the testbed is not up;
#   - a recorded testbed none of whose servers runs (a reboot) does not
#     block an up on other ports;
#   - down also stops servers the folder started whose state file is gone
#     (a testbed from before the state file), which up refuses to orphan.
#
#   testbed_state_test.sh REPO     (meson passes it; see meson.build)
set -uo pipefail

REPO=$1
TESTBED=$REPO/scripts/testbed
DIR=$(mktemp -d "${TMPDIR:-/tmp}/redsync-testbed-state-test.XXXXXX")
unset REDSYNC_NODES REDSYNC_TESTBED_NODES REDSYNC_TESTBED_PORT REDSYNC_TESTBED_DIR
# A new shell: only PATH, the state folder and the server binary meson found.
clean_env=(env -i "PATH=$PATH" "REDSYNC_TESTBED_DIR=$DIR")
[[ -n ${REDSYNC_REDIS_SERVER:-} ]] && clean_env+=("REDSYNC_REDIS_SERVER=$REDSYNC_REDIS_SERVER")
failures=0

cleanup() {
  "${clean_env[@]}" "$TESTBED" down >/dev/null 2>&1 || true
  # Whatever a broken testbed left: only redis-servers running in $DIR.
  local pid
  for pid in $(servers_in_dir); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

port_free() { ! timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# PIDs of the live redis-server processes whose working directory is in $DIR
# (Redis chdirs to its --dir): every server this test's testbed started.
servers_in_dir() {
  local p
  # shellcheck disable=SC2044  # /proc/PID/cwd names have no spaces
  for p in $(find /proc/[0-9]*/cwd -maxdepth 0 -lname "$DIR/*" 2>/dev/null); do
    p=${p%/cwd}
    [[ $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) == *redis-server* ]] || continue
    [[ $(sed 's/.*) //' "$p/stat" 2>/dev/null | cut -c1) != Z ]] || continue
    echo "${p#/proc/}"
  done | sort -n
}
count_in_dir() { servers_in_dir | wc -l; }

# How many of the 5 ports from $1 accept connections.
count_listening() {
  local i n=0
  for ((i = 0; i < 5; i++)); do port_free $(($1 + i)) || n=$((n + 1)); done
  echo "$n"
}

# Ten free ports in a row (two testbeds of 5), away from the default 7001 and
# below the ephemeral range.
find_ports() {
  local try base i ok
  for ((try = 0; try < 50; try++)); do
    base=$((10000 + RANDOM % 20000))
    ok=1
    for ((i = 0; i < 10; i++)); do port_free $((base + i)) || ok=0; done
    ((ok)) && { echo "$base"; return 0; }
  done
  return 1
}

# up_first: starts the testbed on P (retrying elsewhere when a port was taken
# between the check and redis-server's bind: tests run in parallel).
up_first() {
  local attempt out
  for ((attempt = 1; attempt <= 3; attempt++)); do
    P=$(find_ports) || { echo "FAIL: no free ports" >&2; exit 1; }
    Q=$((P + 5))
    out=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$P" "$TESTBED" up --no-wait 2>&1) && return 0
    "${clean_env[@]}" "$TESTBED" down >/dev/null 2>&1
    [[ $out == *"Address already in use"* || $out == *"in use by a process"* ]] || break
  done
  echo "FAIL: testbed up: $out" >&2
  exit 1
}

# ---- state across shells -------------------------------------------------------------
up_first
echo "testbed on ports $P..$((P + 4)), state in $DIR"
want="export REDSYNC_NODES=redis://127.0.0.1:$P"
for ((i = 1; i < 5; i++)); do want+=",redis://127.0.0.1:$((P + i))"; done
[[ -r $DIR/state ]] || fail "up wrote no state file $DIR/state"
grep -qx "port=$P" "$DIR/state" || fail "the state file does not record port=$P: $(cat "$DIR/state")"
[[ $(grep -c '^pid\.[1-5]=' "$DIR/state") == 5 ]] || fail "the state file does not record 5 pids: $(cat "$DIR/state")"

env_out=$("${clean_env[@]}" "$TESTBED" env 2>&1)
[[ $? == 0 && $env_out == "$want" ]] || fail "env in a new shell printed '$env_out', expected '$want'"
status_out=$("${clean_env[@]}" "$TESTBED" status 2>&1)
[[ $(awk -v p="$P" '$2 >= p && $2 <= p + 4 && $3 == "up"' <<<"$status_out" | wc -l) == 5 ]] ||
  fail "status in a new shell does not show ports $P..$((P + 4)) up: $status_out"
pids_before=$(servers_in_dir)
[[ $(wc -l <<<"$pids_before") == 5 ]] || fail "expected 5 servers in $DIR, found: $pids_before"

# ---- a second up on other ports is refused and starts nothing ---------------------------
[[ $(count_listening "$Q") == 0 ]] || fail "ports $Q.. taken before the second up"
second_out=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$Q" "$TESTBED" up --no-wait 2>&1)
second_rc=$?
[[ $second_rc != 0 ]] || fail "a second up on ports $Q.. succeeded: $second_out"
[[ $second_out == *"already up"*"ports $P..$((P + 4))"* && $second_out == *"scripts/testbed down"* ]] ||
  fail "the refusal does not name the running testbed (ports $P..) and how to stop it: $second_out"
[[ $(count_listening "$Q") == 0 ]] || fail "the refused up left servers listening on ports $Q.."
[[ $(servers_in_dir) == "$pids_before" ]] || fail "the refused up changed the servers: $(servers_in_dir) (was $pids_before)"
env_out=$("${clean_env[@]}" "$TESTBED" env 2>/dev/null)
[[ $env_out == "$want" ]] || fail "env after the refused up printed '$env_out'"

# ---- the same up again: already up, nothing started ---------------------------------------
same_out=$("${clean_env[@]}" "$TESTBED" up --no-wait 2>&1)
[[ $? == 0 && $same_out == *"already up"* ]] || fail "up with the same settings: $same_out"
[[ $(servers_in_dir) == "$pids_before" ]] || fail "up with the same settings changed the servers"

# ---- env with a node down (and one paused) ---------------------------------------------------
"${clean_env[@]}" "$TESTBED" kill 3 >/dev/null 2>&1 || fail "kill 3"
"${clean_env[@]}" "$TESTBED" pause 2 >/dev/null 2>&1 || fail "pause 2"
env_err=$("${clean_env[@]}" "$TESTBED" env 2>&1 >"$DIR/env.out")
env_rc=$?
[[ $env_rc == 0 && $(cat "$DIR/env.out") == "$want" ]] ||
  fail "env with node 3 down (rc $env_rc) printed '$(cat "$DIR/env.out")', expected '$want'"
[[ $env_err == *"4/5 nodes running"*"node 3 (port $((P + 2)))"* ]] || fail "env does not warn that node 3 is down: $env_err"
[[ $env_err == *"paused: node 2 (port $((P + 1)))"* ]] || fail "env does not warn that node 2 is paused: $env_err"
# The exported list works in the shell that evals it.
(eval "$(cat "$DIR/env.out")" && [[ $REDSYNC_NODES == "${want#export REDSYNC_NODES=}" ]]) || fail "eval of env's output"

# ---- down stops everything, from a new shell --------------------------------------------------
down_out=$("${clean_env[@]}" "$TESTBED" down 2>&1)
[[ $? == 0 ]] || fail "down: $down_out"
[[ $(count_in_dir) == 0 ]] || fail "servers left after down: $(servers_in_dir)"
[[ $(count_listening "$P") == 0 ]] || fail "ports $P.. still answer after down"
[[ ! -e $DIR/state ]] || fail "down left the state file"
env_err=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$P" "$TESTBED" env 2>&1 >/dev/null)
[[ $? != 0 && $env_err == *"is not up (0/5 nodes running)"* ]] || fail "env after down: $env_err"

# ---- a recorded testbed with no server left (a reboot) does not block other ports -------
up_first
for n in 1 2 3 4 5; do "${clean_env[@]}" "$TESTBED" kill "$n" >/dev/null 2>&1 || fail "kill $n"; done
stale_out=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$Q" "$TESTBED" up --no-wait 2>&1)
[[ $? == 0 && $(count_listening "$Q") == 5 && $(count_in_dir) == 5 ]] || fail "up on ports $Q.. over a dead testbed: $stale_out"
grep -qx "port=$Q" "$DIR/state" || fail "the state file does not record the new ports: $(cat "$DIR/state")"
"${clean_env[@]}" "$TESTBED" down >/dev/null 2>&1 && [[ $(count_in_dir) == 0 ]] || fail "down after the restart on $Q.."

# ---- servers without a state file: up refuses to orphan them, down stops them --------------
# (a testbed started by a version of scripts/testbed without the state file)
up_first
rm -f "$DIR/state"
[[ $(count_in_dir) == 5 ]] || fail "expected 5 servers before the lost-state case"
stray_out=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$Q" "$TESTBED" up --no-wait 2>&1)
[[ $? != 0 && $stray_out == *"still run outside the requested layout"*"port $P "* ]] ||
  fail "up over servers whose state file is gone: $stray_out"
[[ $(count_listening "$Q") == 0 && $(count_in_dir) == 5 ]] || fail "the refused up started or stopped servers"
down_out=$("${clean_env[@]}" REDSYNC_TESTBED_PORT="$Q" "$TESTBED" down 2>&1)
[[ $? == 0 && $(count_in_dir) == 0 ]] || fail "down without a state file left $(servers_in_dir): $down_out"

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
