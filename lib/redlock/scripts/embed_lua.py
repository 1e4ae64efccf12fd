#!/usr/bin/env python3
"""Embeds the Lua scripts of lib/redlock/scripts/lua/ in the library at build
time (lib/redlock/scripts/meson.build runs it): composes every complete script
a node is sent (EVAL/EVALSHA, every variant) from its pieces, and writes a
header with each script's text and SHA1, so that no id is pinned by hand or
computed at run time.

    embed_lua.py --output FILE.hpp PIECE.lua...   the header (Meson's custom_target)
    embed_lua.py --dump DIR PIECE.lua...          each complete script as DIR/<name>.lua
                                                  (scripts/check-lua runs luac5.1 -p on them)

A piece file is a header comment (its leading `--` lines, then one blank
line), which documents the piece and is never sent, and the piece's Lua.

A script is a list of pieces and a list of substitutions, applied in that
order to the joined pieces. Each piece is sent as a newline followed by its
Lua: the scripts were C++ raw strings that each began with a newline, and
keeping those bytes keeps every SHA1 that servers' script caches, function
names and the tests already know. A substitution is a named edit (what,
with) that must match exactly once: a variant is the standalone script with
the edits that make it that variant, so the .lua files hold only the
standalone text and each difference has a name.
"""
import argparse
import hashlib
import pathlib
import sys
from typing import NamedTuple


class Substitution(NamedTuple):
    name: str
    what: str
    with_: str


# A wake-up on a cluster member goes with SPUBLISH: a PUBLISH there is
# broadcast to every node of the cluster, a sharded one stays on the shard of
# the name's slot, where the waiters subscribe (docs/cluster.md).
cluster_publish = Substitution("cluster_publish", "redis.call('PUBLISH'", "redis.call('SPUBLISH'")
# A cluster member's acquisition takes the server mark's key as its last KEY
# (server_mark.hpp).
mark_key_last = Substitution("mark_key_last", "local n = (#KEYS - 1) / 3", "local n = (#KEYS - 2) / 3")
# ... and appends the server mark to its yes (mark_vote.lua's vote()).
acquire_votes = Substitution("acquire_votes", "return {token, run, age, window, in_line}",
                             "return vote({token, run, age, window, in_line})")
semaphore_votes = Substitution("semaphore_votes", "return {token, run, age, window, listed}",
                               "return vote({token, run, age, window, listed})")
# TEST ONLY (semaphore_scripts.hpp): the semaphore's acquisition without the
# slot test (rule S), everything else the same.
count_only = Substitution("count_only", "if slot_live or not open then", "if not open then")
# A reader's wake-up of the readers queued behind it (rw_acquire.lua) is
# spelled with double quotes, so that cluster_publish still matches once.
rw_cluster_publish = Substitution("rw_cluster_publish", 'redis.call("PUBLISH"', 'redis.call("SPUBLISH"')


class Script(NamedTuple):
    pieces: list
    substitutions: tuple = ()


# Every complete script, by the name of its constant in the header. A
# `_cluster` script is what a cluster member runs instead of the script
# without the suffix (lua_script::cluster).
SCRIPTS = {
    # The mutex's scripts that read a waiting line (scripts.cpp).
    "acquire": Script(["acquire_head", "line_prelude", "kind_mark", "grant_record", "acquire"]),
    "acquire_cluster": Script(["acquire_head", "line_prelude", "kind_mark", "grant_record", "mark_vote",
                               "acquire"],
                              [mark_key_last, cluster_publish, acquire_votes]),
    "release": Script(["release_head", "line_prelude", "release"]),
    "release_cluster": Script(["release_head", "line_prelude", "release"], [cluster_publish]),
    "leave": Script(["leave_head", "line_prelude", "rw_mark", "rw_wake", "leave"]),
    "leave_cluster": Script(["leave_head", "line_prelude", "rw_mark", "rw_wake", "leave"],
                            [cluster_publish, rw_cluster_publish]),
    # The holder's (holder_scripts.cpp) and the node record's
    # (record_scripts.cpp): the same on every kind of member.
    "extend": Script(["extend"]),
    "check": Script(["check"]),
    "fence": Script(["raise_fence", "fence"]),
    "record_read": Script(["record_read"]),
    "record_stamp": Script(["record_stamp"]),
    # The semaphore's (semaphore_scripts.cpp). Every one but the fencing
    # write-back keeps the name's kind mark (kind_mark.lua) with its permits.
    "semaphore_acquire": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                 "grant_record", "semaphore_acquire"]),
    "semaphore_acquire_cluster": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                         "grant_record", "mark_vote", "semaphore_acquire"],
                                        [semaphore_votes, cluster_publish]),
    "semaphore_acquire_count_only": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                            "grant_record", "semaphore_acquire"],
                                           [count_only]),
    "semaphore_acquire_count_only_cluster": Script(["kind_mark", "semaphore_prelude", "semaphore_line",
                                                    "semaphore_wake", "grant_record", "mark_vote",
                                                    "semaphore_acquire"],
                                                   [count_only, semaphore_votes, cluster_publish]),
    "semaphore_release": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                 "semaphore_release"]),
    "semaphore_release_cluster": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                         "semaphore_release"], [cluster_publish]),
    "semaphore_leave": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                               "semaphore_leave"]),
    "semaphore_leave_cluster": Script(["kind_mark", "semaphore_prelude", "semaphore_line", "semaphore_wake",
                                       "semaphore_leave"], [cluster_publish]),
    "semaphore_extend": Script(["kind_mark", "semaphore_prelude", "semaphore_extend"]),
    "semaphore_fence": Script(["raise_fence", "semaphore_fence"]),
    # An RWMutex's reader (rw_scripts.cpp); its writer runs the mutex's.
    "rw_acquire": Script(["rw_acquire_head", "line_prelude", "kind_mark", "rw_mark", "rw_wake", "grant_record",
                          "rw_acquire"]),
    "rw_acquire_cluster": Script(["rw_acquire_head", "line_prelude", "kind_mark", "rw_mark", "rw_wake",
                                  "grant_record", "mark_vote", "rw_acquire"], [cluster_publish, rw_cluster_publish, acquire_votes]),
    "rw_release": Script(["rw_release_head", "line_prelude", "rw_mark", "rw_release"]),
    "rw_release_cluster": Script(["rw_release_head", "line_prelude", "rw_mark", "rw_release"], [cluster_publish]),
    "rw_leave": Script(["rw_release_head", "line_prelude", "rw_mark", "rw_wake", "leave"]),
    "rw_leave_cluster": Script(["rw_release_head", "line_prelude", "rw_mark", "rw_wake", "leave"],
                               [cluster_publish, rw_cluster_publish]),
    "rw_extend": Script(["rw_mark", "rw_extend"]),
    "rw_check": Script(["rw_mark", "rw_check"]),
}


def fail(message: str) -> None:
    print(f"embed_lua.py: {message}", file=sys.stderr)
    sys.exit(1)


def read_piece(path: pathlib.Path) -> bytes:
    """The piece as it is sent: a newline, then the file after its header comment."""
    lines = path.read_bytes().split(b"\n")
    at = 0
    while at < len(lines) and lines[at].startswith(b"--"):
        at += 1
    if at == 0 or at >= len(lines) or lines[at] != b"":
        fail(f"{path}: a piece starts with a header comment (`--` lines) and a blank line")
    return b"\n" + b"\n".join(lines[at + 1:])


def compose(script: Script, pieces: dict, name: str) -> bytes:
    text = b"".join(pieces[p] for p in script.pieces)
    for s in script.substitutions:
        what, with_ = s.what.encode(), s.with_.encode()
        if text.count(what) != 1:
            fail(f"{name}: substitution {s.name} matches {text.count(what)} times, not once: {s.what!r}")
        text = text.replace(what, with_)
    return text


def cpp_literal(text: bytes, indent: str) -> str:
    """`text` as adjacent C++ string literals, one per line of Lua."""
    out = []
    for line in text.splitlines(keepends=True):
        chars = []
        for b in line:
            c = chr(b)
            if c == "\\" or c == '"':
                chars.append("\\" + c)
            elif c == "\n":
                chars.append("\\n")
            elif 0x20 <= b < 0x7F:
                chars.append(c)
            else:
                chars.append(f"\\{b:03o}")
        out.append(f'{indent}"{"".join(chars)}"')
    return "\n".join(out) if out else f'{indent}""'


def header(pieces: dict, scripts: dict) -> str:
    out = [
        "// Generated by lib/redlock/scripts/embed_lua.py from lib/redlock/scripts/lua/*.lua",
        "// at build time: do not edit. Each complete script's text and SHA1.",
        "#pragma once",
        "",
        "#include <string_view>",
        "",
        "namespace redsync::detail::lua {",
        "",
        "struct script_text {",
        "  std::string_view source;",
        "  std::string_view sha1;  // lowercase hex, what SCRIPT LOAD returns",
        "};",
        "",
        "// Each piece as the scripts contain it (a newline, then the file's Lua).",
        "namespace piece {",
    ]
    for name, text in sorted(pieces.items()):
        out += [f"inline constexpr std::string_view {name}{{", cpp_literal(text, "    ") + ",", f"    {len(text)}}};"]
    out += ["}  // namespace piece", ""]
    for name, (script, text) in scripts.items():
        parts = " + ".join(f"{p}.lua" for p in script.pieces)
        edits = ", ".join(s.name for s in script.substitutions)
        out += [f"// {parts}" + (f"; substitutions: {edits}" if edits else ""),
                f"inline constexpr script_text {name}{{std::string_view{{",
                cpp_literal(text, "    ") + ",", f"    {len(text)}}},",
                f'    "{hashlib.sha1(text).hexdigest()}"}};', ""]
    out += ["}  // namespace redsync::detail::lua", ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--output", type=pathlib.Path, help="the header to write")
    mode.add_argument("--dump", type=pathlib.Path, help="a directory for each complete script as <name>.lua")
    parser.add_argument("pieces", nargs="+", type=pathlib.Path)
    args = parser.parse_args()

    pieces = {p.stem: read_piece(p) for p in args.pieces}
    used = {p for s in SCRIPTS.values() for p in s.pieces}
    if used - pieces.keys():
        fail(f"pieces named in SCRIPTS but not given: {', '.join(sorted(used - pieces.keys()))}")
    if pieces.keys() - used:
        fail(f"pieces given but in no script: {', '.join(sorted(pieces.keys() - used))}")
    scripts = {name: (s, compose(s, pieces, name)) for name, s in SCRIPTS.items()}

    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for name, (_, text) in scripts.items():
            (args.dump / f"{name}.lua").write_bytes(text)
        return
    args.output.write_text(header(pieces, scripts))


if __name__ == "__main__":
    main()
