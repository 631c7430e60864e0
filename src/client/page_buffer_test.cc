#include "client/page_buffer.h"

#include <gtest/gtest.h>

namespace cairn::client {
namespace {

TEST(PageMemoryTest, RecyclesWholePagesOnlyAndKeepsAtMostTheCap) {
  PageMemory memory(/*page_size=*/4096, /*max_free=*/2);
  AlignedBytes a = memory.Take(4096);
  AlignedBytes b = memory.Take(4096);
  AlignedBytes c = memory.Take(4096);
  AlignedBytes tail = memory.Take(100);  // A file's last, short page.
  char* const a_bytes = a.get();
  char* const b_bytes = b.get();
  memory.Give(std::move(a), 4096);
  memory.Give(std::move(b), 4096);
  memory.Give(std::move(c), 4096);    // Over the cap: freed.
  memory.Give(std::move(tail), 100);  // Not a whole page: freed.
  AlignedBytes again1 = memory.Take(4096);
  AlignedBytes again2 = memory.Take(4096);
  EXPECT_TRUE((again1.get() == a_bytes && again2.get() == b_bytes) ||
              (again1.get() == b_bytes && again2.get() == a_bytes));
  AlignedBytes short_page = memory.Take(100);
  EXPECT_NE(short_page.get(), nullptr);
  // Every buffer can take an O_DIRECT read.
  for (const char* p : {again1.get(), again2.get(), short_page.get()}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kDirectIoAlignment, 0u);
  }
}

TEST(PageBufferTest, SlotMemoryReturnsWhenTheLastHolderLetsGo) {
  PageBuffer buffer(/*capacity_bytes=*/2 * PageBuffer::Footprint(4096), /*page_size=*/4096);
  std::shared_ptr<PageBuffer::Slot> first = buffer.Create(Hash128Of("p0"), 4096);
  ASSERT_NE(first, nullptr);
  std::span<char> bytes = first->Allocate(4096);
  bytes[0] = 'x';
  first->Finish(Status::Ok());
  char* const first_bytes = bytes.data();
  EXPECT_EQ(buffer.Create(Hash128Of("p0"), 4096), nullptr);  // Being fetched or held already.
  // Two more pages evict the first from the buffer; a reader still holds it, so its bytes stay.
  ASSERT_NE(buffer.Create(Hash128Of("p1"), 4096), nullptr);
  ASSERT_NE(buffer.Create(Hash128Of("p2"), 4096), nullptr);
  EXPECT_EQ(buffer.Find(Hash128Of("p0")), nullptr);
  EXPECT_EQ(first->data()[0], 'x');
  first.reset();  // Its memory goes back for the next page.
  std::shared_ptr<PageBuffer::Slot> next = buffer.Create(Hash128Of("p3"), 4096);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->Allocate(4096).data(), first_bytes);
}

TEST(PageBufferTest, SmallPagesAreChargedWhatTheyCostInMemory) {
  // The last pages of tiny files: 50 bytes each, but an aligned allocation and a slot apiece.
  EXPECT_EQ(PageBuffer::Footprint(50), 2 * kDirectIoAlignment);
  EXPECT_EQ(PageBuffer::Footprint(4096), 2 * kDirectIoAlignment);
  EXPECT_EQ(PageBuffer::Footprint(4097), 3 * kDirectIoAlignment);
  EXPECT_EQ(PageBuffer::Footprint(1 << 20), (1u << 20) + kDirectIoAlignment);
  PageBuffer buffer(/*capacity_bytes=*/10 * PageBuffer::Footprint(50), /*page_size=*/1 << 20);
  for (int i = 0; i < 30; ++i) {
    std::string id = "tiny" + std::to_string(i);
    ASSERT_NE(buffer.Create(Hash128Of(id), 50), nullptr);
  }
  int kept = 0;
  for (int i = 0; i < 30; ++i) {
    kept += buffer.Find(Hash128Of("tiny" + std::to_string(i))) != nullptr;
  }
  EXPECT_EQ(kept, 10);  // Charged 50 bytes each, all 30 would have stayed.
  EXPECT_NE(buffer.Find(Hash128Of("tiny29")), nullptr);  // The newest ones.
  EXPECT_EQ(buffer.Find(Hash128Of("tiny0")), nullptr);
}

}  // namespace
}  // namespace cairn::client
