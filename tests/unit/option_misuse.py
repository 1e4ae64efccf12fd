#!/usr/bin/env python3
"""What a user types for the retry and extension options: the good forms
compile, and the wrong ones stop the build with the library's own message
(naming the option), not a bare "cannot convert brace-enclosed initializer
list".

    option_misuse.py INCLUDE_DIR COMPILER [ARGS...]
"""
import pathlib
import subprocess
import sys

include, compiler = pathlib.Path(sys.argv[1]), sys.argv[2:]
prelude = """#include <redsync/redsync.hpp>
using namespace std::chrono_literals;
void f(redsync::Redsync& rs) {
"""
delay_message = "retry_delay takes a std::chrono duration"
cases = [
    # (what, body, None = must compile, else a text the first error must contain)
    ("a duration", 'auto m = rs.new_mutex("x", {.expiry = 1s, .retry_delay = 100ms});', None),
    ("a callable", 'auto m = rs.new_mutex("x", {.retry_delay = [](int n) { return n * 10ms; }});', None),
    ("unlimited tries", 'auto s = rs.new_semaphore("x", 2, {.tries = redsync::unlimited_tries, .retry_delay = 1s});',
     None),
    ("extend by seconds", 'auto m = rs.new_mutex("x"); (void)m.extend(2s); (void)m.extend({});', None),
    ("a bare number", 'auto m = rs.new_mutex("x", {.retry_delay = 100});', delay_message),
    ("a callable returning int", 'auto m = rs.new_mutex("x", {.retry_delay = [](int) { return 5; }});',
     delay_message),
    ("a semaphore's bare number", 'auto s = rs.new_semaphore("x", 2, {.retry_delay = 1.5});', delay_message),
    ("extend by microseconds", 'auto m = rs.new_mutex("x"); (void)m.extend(1500us);',
     "Mutex::extend takes whole milliseconds"),
]
failures = []
for what, body, expected in cases:
    source = prelude + body + "\n}\n"
    run = subprocess.run(compiler + ["-std=c++20", "-fsyntax-only", f"-I{include}", "-x", "c++", "-"],
                         input=source, capture_output=True, text=True)
    errors = [line for line in run.stderr.splitlines() if "error" in line]
    if expected is None:
        if run.returncode != 0:
            failures.append(f"{what}: does not compile: {errors[:2]}")
    elif run.returncode == 0:
        failures.append(f"{what}: compiles")
    elif not errors or expected not in errors[0]:
        failures.append(f"{what}: first error does not say '{expected}': {errors[:1]}")
for f in failures:
    print(f"option_misuse: {f}", file=sys.stderr)
print(f"option_misuse: {'FAILED' if failures else 'ok'} ({len(cases)} cases)")
sys.exit(1 if failures else 0)
