#pragma once

// A hint to the CPU that this thread spins, so the core's other thread runs.

namespace redsync::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace redsync::detail
