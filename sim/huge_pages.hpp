// A hint for large buffers that are about to be filled end to end (an inflated trace, the
// decoder's tables): back them with transparent huge pages, one page fault per 2 MiB instead of
// one per 4 KiB. Decoding a snapshot touches some 200 MB; in 4 KiB pages the kernel's fault
// handling took about a third of `allocsim replay`'s time.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace allocsim {

// Advises the whole 2 MiB pages inside [p, p + bytes). Only a hint: where the kernel has THP off
// (or on another OS) it changes nothing, and nothing depends on it.
void advise_huge_pages(void* p, size_t bytes);

// The default (new/delete) resource, with advise_huge_pages on every block it hands out: an
// upstream for arenas whose blocks grow to megabytes.
std::pmr::memory_resource* huge_page_resource();

}  // namespace allocsim
