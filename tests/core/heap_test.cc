// core/heap.h: freed memory at the top of the heap stays with the process.
#include "core/heap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define PW_TEST_FOREIGN_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PW_TEST_FOREIGN_MALLOC 1
#endif

namespace {

// 96 MiB in 64 KiB blocks (each under glibc's 128 KiB mmap threshold, so from the heap), freed
// newest first so that each merges into the heap's top. glibc trims the top once it exceeds the
// trim threshold: 128 KiB by default and at most 64 MiB however its dynamic threshold has grown
// (twice the largest mmap threshold, 32 MiB), so without keep_freed_heap_top the top keeps less
// than 64 MiB + 128 KiB; with it (1 GiB) all 96 MiB stay releasable at the top (keepcost).
TEST(Heap, FreedBlocksAtTheHeapsTopStayWithTheProcess) {
#if !defined(__GLIBC__) || defined(PW_TEST_FOREIGN_MALLOC)
  GTEST_SKIP() << "glibc's malloc only (a sanitizer replaces it)";
#else
  pw::keep_freed_heap_top();
  constexpr std::size_t kBlock = std::size_t{64} << 10, kBlocks = 1536;  // 96 MiB
  std::vector<void*> blocks;
  blocks.reserve(kBlocks);
  for (std::size_t i = 0; i < kBlocks; ++i) {
    void* b = std::malloc(kBlock);
    ASSERT_NE(b, nullptr);
    std::memset(b, 1, kBlock);  // touched, as a real block is
    blocks.push_back(b);
  }
  for (std::size_t i = kBlocks; i-- > 0;) std::free(blocks[i]);
  const struct mallinfo2 info = mallinfo2();
  EXPECT_GE(info.keepcost, kBlock * kBlocks);
  static_assert(pw::kHeapTrimThreshold > kBlock * kBlocks);
#endif
}

// Blocks under kHeapMmapThreshold (4 MiB) come from the heap, so a block freed and asked for
// again is the same memory, not a fresh mapping the kernel zero-fills page by page (glibc's
// fixed 128 KiB threshold mapped every block from 128 KiB up); blocks above it are mapped.
TEST(Heap, BlocksUnderTheMmapThresholdComeFromTheHeap) {
#if !defined(__GLIBC__) || defined(PW_TEST_FOREIGN_MALLOC)
  GTEST_SKIP() << "glibc's malloc only (a sanitizer replaces it)";
#else
  pw::keep_freed_heap_top();
  malloc_trim(0);  // free memory an earlier test left at the top would serve any size
  const int mapped_before = mallinfo2().hblks;
  void* mid = std::malloc(pw::kHeapMmapThreshold / 2);  // 2 MiB: from the heap
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped_before);
  void* big = std::malloc(pw::kHeapMmapThreshold * 2);  // 8 MiB: its own mapping
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(mallinfo2().hblks, mapped_before + 1);
  std::free(big);
  std::free(mid);
  EXPECT_EQ(mallinfo2().hblks, mapped_before);
#endif
}

}  // namespace
