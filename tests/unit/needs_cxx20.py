#!/usr/bin/env python3
"""Each public header, compiled alone as C++17, must fail with redsync's own
"needs C++20" message as its first error (not a cryptic one from <stop_token>),
and compile cleanly as C++20.

    needs_cxx20.py INCLUDE_DIR COMPILER [ARGS...]
"""
import pathlib
import subprocess
import sys

include, compiler = pathlib.Path(sys.argv[1]), sys.argv[2:]
# The opt-in Asio headers are checked where Asio is installed (CI: libasio-dev).
has_asio = subprocess.run(compiler + ["-std=c++20", "-fsyntax-only", "-x", "c++", "-"],
                          input="#include <asio/version.hpp>\n", capture_output=True, text=True).returncode == 0
failures = []
for header in sorted((include / "redsync").glob("*.hpp")):
    if header.name == "fmt.hpp":  # needs {fmt} on the include path; covered through error.hpp
        continue
    if header.name in ("asio.hpp", "asio_completion.hpp") and not has_asio:
        print(f"needs_cxx20: {header.name} skipped: no <asio/version.hpp>")
        continue
    source = f"#include <redsync/{header.name}>\n"
    for std, must_fail in (("c++17", True), ("c++20", False)):
        # Below C++20 only the first error counts: stop there (what follows
        # it, Asio's headers for asio.hpp, would take seconds to parse).
        fatal = ["-Wfatal-errors"] if must_fail else []
        run = subprocess.run(compiler + [f"-std={std}", "-fsyntax-only", *fatal, f"-I{include}", "-x", "c++", "-"],
                             input=source, capture_output=True, text=True)
        errors = [line for line in run.stderr.splitlines() if " error: " in line]
        if must_fail:
            if run.returncode == 0:
                failures.append(f"{header.name}: compiles as {std}")
            elif not errors or "redsync needs C++20" not in errors[0]:
                failures.append(f"{header.name}: first {std} error is not ours: {errors[:1]}")
        elif run.returncode != 0:
            failures.append(f"{header.name}: does not compile as {std}: {errors[:2]}")
for f in failures:
    print(f"needs_cxx20: {f}", file=sys.stderr)
print(f"needs_cxx20: {'FAILED' if failures else 'ok'}")
sys.exit(1 if failures else 0)
