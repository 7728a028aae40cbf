// A counting global operator new for the allocation checks: every C++ allocation of the program
// goes through it; while counting() is on, each one is counted (and, with SPARSEPUSH_ALLOC_ABORT
// set in the environment, aborts, so that a debugger shows where it came from). Include in
// exactly one translation unit of a program.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace alloc_check {
inline std::atomic<bool> on{false};
inline std::atomic<std::size_t> count{0};
inline bool abort_on_count = std::getenv("SPARSEPUSH_ALLOC_ABORT") != nullptr;

inline void* allocate(std::size_t n, std::size_t align) {
  if (on.load(std::memory_order_relaxed)) {
    count.fetch_add(1, std::memory_order_relaxed);
    if (abort_on_count) std::abort();
  }
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                                : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}

/// Allocations made while f() runs with counting on.
template <class F>
std::size_t allocations_during(F&& f) {
  count = 0;
  on = true;
  f();
  on = false;
  return count.load();
}
}  // namespace alloc_check

void* operator new(std::size_t n) { return alloc_check::allocate(n, 0); }
void* operator new[](std::size_t n) { return alloc_check::allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return alloc_check::allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return alloc_check::allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return alloc_check::allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
