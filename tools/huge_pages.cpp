// Large allocations backed by transparent huge pages where the kernel offers them on request.
//
// Importing a trace allocates a few large buffers (the file read whole, the JSON parser's
// structural index and string buffer, the op and edge vectors) and touches each page once. With
// 4 KiB pages that is one page fault per 4 KiB: on a 112 MB Kineto trace 43 % of `bneck replay`'s
// time was the kernel's (faults, zeroing, freeing). Linux's transparent huge pages in their
// default "madvise" mode serve 2 MiB pages only to ranges a program marks with
// madvise(MADV_HUGEPAGE). The bneck executable replaces the global operator new (a replaceable
// allocation function of standard C++) with malloc plus that mark on the whole 2 MiB pages inside
// every block of 4 MiB or more, before anything touches them; operator delete is free(). Other
// systems, and small blocks, are served by malloc alone. Measured in docs/performance.md.
//
// Off unless BNECK_HUGE_PAGES=1: a huge page is only faster where the machine has the memory at
// hand. In a virtual machine whose host reclaims the guest's idle memory, huge pages the guest had
// not used for 15 s faulted at 0.1 GB/s (4 KiB pages: 1.45 GB/s; huge pages in recent use: 21
// GB/s): the 112 MB Kineto replay took 1.63-1.68 s instead of 0.47-0.48 s, the 2 M-kernel nsys
// replay 7.7-8.2 s instead of 5.0-5.4 s; in recent use they saved 0.0-0.1 s. Timing each block's
// first huge page and falling back did not help: the first page was at hand, the rest was not.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

constexpr std::size_t kHuge = std::size_t{2} << 20;  // a transparent huge page

void* allocate(std::size_t n) noexcept {
  void* p = std::malloc(n == 0 ? 1 : n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool on = [] {
    const char* v = std::getenv("BNECK_HUGE_PAGES");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (p && on && n >= 2 * kHuge) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t lo = (b + kHuge - 1) & ~(kHuge - 1), hi = (b + n) & ~(kHuge - 1);
    if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // a hint: its failure changes nothing
  }
#endif
  return p;
}

void* allocate_or_throw(std::size_t n) {
  void* p = allocate(n);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
