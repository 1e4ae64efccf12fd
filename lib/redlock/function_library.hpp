#pragma once

// Redis Functions (script_mode::functions): each Lua script of scripts.cpp
// becomes a function library generated at run time from the script's own
// source, so there is one copy of every script whichever mode runs it.
//
// One library per script, named after the SHA1 of its source
// (`redsync_<sha1>`, which is also the name of its one function): a changed
// script is a new library loaded alongside the old one (clients of both
// versions keep working during a rolling upgrade), an unchanged one keeps
// its name, and function names, which Redis keeps in one namespace for all
// libraries, never clash between versions.

#include "redlock/script_call.hpp"

#include <string>

namespace redsync::detail {

// "redsync_<sha1>": the library's name and its function's name.
std::string function_name(const lua_script& s);

// The library text for FUNCTION LOAD: a `#!lua name=...` header and the
// script's source as the body of the registered function (KEYS and ARGV
// become its parameters). The read-only check script gets the `no-writes`
// flag (so it also runs under OOM and via FCALL_RO); the others may write.
std::string function_library(const lua_script& s);

}  // namespace redsync::detail
