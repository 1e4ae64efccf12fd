#!/usr/bin/env python3
"""<redsync/asio.hpp>'s compile-time rules: every token that names where its
handler runs compiles (a coroutine, deferred, use_future, a bound callback,
a bound asio::detached), and a handler with no executor of its own stops the
build with the library's message saying to bind one, instead of running on
Asio's system thread pool. Skipped (exit 77) where Asio is not installed.

    asio_token_misuse.py INCLUDE_DIR COMPILER [ARGS...]
"""
import pathlib
import subprocess
import sys

include, compiler = pathlib.Path(sys.argv[1]), sys.argv[2:]
prelude = """#include <redsync/asio.hpp>
#include <asio.hpp>
#include <asio/experimental/deferred.hpp>
using namespace std::chrono_literals;
asio::awaitable<void> f(redsync::Mutex& m, redsync::Semaphore& s, asio::io_context& io) {
"""
no_executor = "this completion handler has no associated executor"
cases = [
    # (what, body, None = must compile, else a text the first error must contain)
    ("a coroutine", "auto r = co_await redsync::async_lock(m, {}, asio::use_awaitable); (void)r;", None),
    ("a permit in a coroutine",
     "auto a = co_await redsync::async_acquire(s, {}, asio::use_awaitable);"
     " co_await redsync::async_extend(a.permit, {}, asio::use_awaitable);", None),
    ("deferred", "co_await redsync::async_unlock(m, {}, asio::experimental::deferred)(asio::use_awaitable);", None),
    ("use_future", "auto r = redsync::async_try_lock(m, {}, asio::use_future); (void)r;", None),
    ("a bound callback", "redsync::async_extend(m, 2s, {}, asio::bind_executor(io, [](redsync::result) {}));", None),
    ("a bound detached", "redsync::async_unlock(m, {}, asio::bind_executor(io, asio::detached));", None),
    ("a plain callback", "redsync::async_lock(m, {}, [](redsync::result) {});", no_executor),
    ("detached", "redsync::async_unlock(m, {}, asio::detached);", no_executor),
    ("extend by microseconds",
     "redsync::async_extend(m, 1500us, {}, asio::bind_executor(io, [](redsync::result) {}));",
     "Mutex::extend takes whole milliseconds"),
]
probe = subprocess.run(compiler + ["-std=c++20", "-fsyntax-only", "-x", "c++", "-"],
                       input="#include <asio/version.hpp>\n", capture_output=True, text=True)
if probe.returncode != 0:
    print("asio_token_misuse: skipped: no <asio/version.hpp>")
    sys.exit(77)

def compile_errors(body):
    """(exit status, error lines) of compiling `body` inside the coroutine above."""
    run = subprocess.run(compiler + ["-std=c++20", "-fsyntax-only", f"-I{include}", "-x", "c++", "-"],
                         input=prelude + body + "\n  co_return;\n}\n", capture_output=True, text=True)
    return run.returncode, [line for line in run.stderr.splitlines() if "error" in line]


failures = []
# Asio makes each compile take seconds: the cases that must compile go in one.
good = ["{ " + body + " }" for _, body, expected in cases if expected is None]
status, errors = compile_errors("\n".join(good))
if status != 0:
    failures.append(f"the good forms do not compile: {errors[:2]}")
for what, body, expected in cases:
    if expected is None:
        continue
    status, errors = compile_errors(body)
    if status == 0:
        failures.append(f"{what}: compiles")
    elif not errors or expected not in errors[0]:
        failures.append(f"{what}: first error does not say '{expected}': {errors[:1]}")
for f in failures:
    print(f"asio_token_misuse: {f}", file=sys.stderr)
print(f"asio_token_misuse: {'FAILED' if failures else 'ok'} ({len(cases)} cases)")
sys.exit(1 if failures else 0)
