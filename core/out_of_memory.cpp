#include "core/out_of_memory.hpp"

#include "core/format_size.hpp"

namespace allocsim {

std::string OutOfMemory::message(std::optional<uint64_t> process_in_use) const {
  if (too_large) return "CUDA out of memory. Tried to allocate more than 1EB memory.";
  if (rejected) {
    return "CUDA out of memory. Allocation was preemptively rejected because it would exceed "
           "per_process_memory_fraction limit. Requested size: " +
           format_size(requested);
  }
  std::string m = "CUDA out of memory. Tried to allocate " + format_size(alloc_size) + ". GPU " +
                  std::to_string(device_index) + " has a total capacity of " +
                  format_size(device_total) + " of which " + format_size(device_free) +
                  " is free. ";
  if (process_in_use) {
    m += "Including non-PyTorch memory, this process has " + format_size(*process_in_use) +
         " memory in use. ";
  }
  if (allowed) m += format_size(*allowed) + " allowed; ";
  // PyTorch counts the free blocks of private pools as allocated.
  const uint64_t in_use = allocated + allocated_in_private_pools;
  m += "Of the allocated memory " + format_size(in_use) + " is allocated by PyTorch, ";
  if (allocated_in_private_pools > 0) {
    m += "with " + format_size(allocated_in_private_pools) +
         " allocated in private pools (e.g., CUDA Graphs), ";
  }
  m += "and " + format_size(reserved - in_use) +
       " is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
       "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
       "documentation for Memory Management  "
       "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-"
       "cuda-alloc-conf)";
  return m;
}

}  // namespace allocsim
