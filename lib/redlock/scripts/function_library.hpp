#pragma once

// Redis Functions (script_mode::functions): each Lua script of scripts.hpp
// and semaphore_scripts.hpp becomes a function library generated at run
// time from the script's own source, so there is one copy of every script
// whichever mode runs it.
//
// One library per script, named after the SHA1 of all of it but the name:
// the source and the function's flags (`redsync_<sha1>`, which is also the
// name of its one function). A changed script or flag is a new library
// loaded alongside the old one (clients of both versions keep working during
// a rolling upgrade, and a node never keeps running an old version under
// the new name), an unchanged one keeps its name, and function names, which
// Redis keeps in one namespace for all libraries, never clash between
// versions.

#include "redlock/scripts/script_call.hpp"

#include <string>

namespace redsync::detail {

// "redsync_<sha1>": the library's name and its function's name (hashed once
// per script of scripts.hpp).
std::string function_name(const lua_script& s);

// The library text for FUNCTION LOAD: a `#!lua name=...` header and the
// script's source as the body of the registered function (KEYS and ARGV
// become its parameters). The read-only check script gets the `no-writes`
// flag (so it also runs over maxmemory and via FCALL_RO); release, leave and
// extend, the mutex's and the semaphore's, `allow-oom` (a holder can let go
// and extend on a node over its maxmemory); acquire, the fencing write-backs
// and the record scripts none (refused there).
std::string function_library(const lua_script& s);

}  // namespace redsync::detail
