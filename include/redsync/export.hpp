#pragma once

/// \file
/// Symbol visibility: the shared library is built with hidden visibility and
/// exports only what is marked REDSYNC_API.

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
