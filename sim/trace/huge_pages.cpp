#include "sim/trace/huge_pages.hpp"

#include <cstdint>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace allocsim {

void advise_huge_pages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t last = (start + bytes) & ~(kHugePage - 1);
  // Failure (THP compiled out, an old kernel) leaves ordinary pages: nothing to report.
  // The aligned start as an offset into the buffer, not a pointer made from an integer.
  if (last > first)
    (void)madvise(static_cast<char*>(p) + (first - start), last - first, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

namespace {

class HugePageResource : public std::pmr::memory_resource {
  void* do_allocate(size_t bytes, size_t alignment) override {
    void* p = std::pmr::new_delete_resource()->allocate(bytes, alignment);
    advise_huge_pages(p, bytes);
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

}  // namespace

std::pmr::memory_resource* huge_page_resource() {
  static HugePageResource resource;
  return &resource;
}

}  // namespace allocsim
