// A hint for large buffers that are about to be filled end to end (an inflated trace, the
// decoder's tables): back them with transparent huge pages, one page fault per 2 MiB instead of
// one per 4 KiB. Decoding a snapshot touches some 200 MB; in 4 KiB pages the kernel's fault
// handling took about a third of `allocsim replay`'s time.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <vector>

namespace allocsim {

// Advises the whole 2 MiB pages inside [p, p + bytes). Only a hint: where the kernel has THP off
// (or on another OS) it changes nothing, and nothing depends on it.
void advise_huge_pages(void* p, size_t bytes);

// Reserves room for n elements and advises it: a table about to be filled with up to n of them.
template <class T>
void reserve_huge_pages(std::vector<T>& v, size_t n) {
  v.reserve(n);
  advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

// The default (new/delete) resource, with advise_huge_pages on every block it hands out: an
// upstream for arenas whose blocks grow to megabytes.
std::pmr::memory_resource* huge_page_resource();

}  // namespace allocsim
