#!/bin/sh
# Builds count_cycle (issue 34's counting driver) against a worktree's dev
# build (static library; build bench/redsync_bench first for transport.cpp.o).
# Usage: bench/results/issue34/build.sh WORKTREE OUT
#   OUT async|raw N PORT...          counts per cycle
#   SITES=file OUT ...                + malloc call sites (addresses; see sym.py)
#   HANDLE_SITES=1 SITES=file OUT ... + uv_timer_start / uv_idle_start sites instead
#   valgrind --tool=callgrind --instr-atstart=no OUT ...   instructions of the measured window only
set -e
W=$1
OUT=$2
B=$W/build-dev
nice c++ -I"$W/bench" -I"$W/include" -I"$W/lib" -I"$B/include" -I"$B/lib" -std=c++20 -O1 -g1 \
  -isystem/usr/include/hiredis -pthread -w -o "$OUT" "$W/bench/results/issue34/count_cycle.cpp" \
  "$B/bench/redsync_bench.p/transport.cpp.o" \
  -Wl,--start-group "$B/lib/libredsync.a" -lhiredis -luv -lpthread -ldl -lrt -lfmt -lssl -lcrypto -Wl,--end-group
