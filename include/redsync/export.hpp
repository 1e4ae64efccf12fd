#pragma once

/// \file
/// Symbol visibility: the shared library is built with hidden visibility and
/// exports only what is marked REDSYNC_API. Every public header includes this
/// one, so it is also where a too-old language mode is stopped with a clear
/// message instead of an error deep inside <stop_token>.

// 201703L is C++17; GCC 10 reports 201709L in its C++20 mode.
#if defined(__cplusplus) && !defined(_MSC_VER) && __cplusplus <= 201703L
#error "redsync needs C++20: compile with -std=c++20 (or later)"
#endif

#if defined(REDSYNC_STATIC)
#define REDSYNC_API
#elif defined(_WIN32)
#if defined(REDSYNC_BUILDING)
#define REDSYNC_API __declspec(dllexport)
#else
#define REDSYNC_API __declspec(dllimport)
#endif
#else
#define REDSYNC_API __attribute__((visibility("default")))
#endif
