#include "fuse/inode_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace cairn::fuse {
namespace {

TEST(InodeTableTest, RootIsKnownAndPinned) {
  InodeTable table;
  EXPECT_EQ(table.Find("/"), InodeTable::kRootIno);
  ASSERT_TRUE(table.Get(InodeTable::kRootIno).has_value());
  EXPECT_EQ(table.Get(InodeTable::kRootIno)->path, "/");
  EXPECT_TRUE(table.Get(InodeTable::kRootIno)->is_dir);
  table.Forget(InodeTable::kRootIno, 100);
  EXPECT_TRUE(table.Get(InodeTable::kRootIno).has_value());
  EXPECT_EQ(table.Ref("/", true), InodeTable::kRootIno);
}

TEST(InodeTableTest, SamePathKeepsNumberWhileReferenced) {
  InodeTable table;
  const uint64_t a = table.Ref("/a", false);
  EXPECT_NE(a, InodeTable::kRootIno);
  EXPECT_EQ(table.Ref("/a", false), a);
  EXPECT_EQ(table.LookupCount(a), 2u);
  EXPECT_NE(table.Ref("/b", false), a);
  table.Forget(a, 1);
  EXPECT_EQ(table.Find("/a"), a);
  EXPECT_EQ(table.Ref("/a", false), a);
}

TEST(InodeTableTest, ForgetToZeroDropsAndNumbersAreNeverReused) {
  InodeTable table;
  const uint64_t a = table.Ref("/a", false);
  table.Forget(a, 1);
  EXPECT_FALSE(table.Get(a).has_value());
  EXPECT_EQ(table.Find("/a"), 0u);
  const uint64_t again = table.Ref("/a", false);
  EXPECT_NE(again, a);
  EXPECT_EQ(table.size(), 2u);
}

TEST(InodeTableTest, ForgetMismatchesAreToleratedNotFatal) {
  InodeTable table;
  table.Forget(12345, 1);  // Unknown: logged only.
  const uint64_t a = table.Ref("/a", false);
  table.Forget(a, 5);  // More than held: clamps to zero and drops.
  EXPECT_FALSE(table.Get(a).has_value());
}

TEST(InodeTableTest, TypeChangeGetsNewNumberAndOldOneLivesUntilForgotten) {
  InodeTable table;
  const uint64_t file = table.Ref("/x", false);
  const uint64_t dir = table.Ref("/x", true);
  EXPECT_NE(file, dir);
  EXPECT_EQ(table.Find("/x"), dir);
  ASSERT_TRUE(table.Get(file).has_value());
  EXPECT_FALSE(table.Get(file)->is_dir);
  table.Forget(file, 1);  // Must not unmap the path from the new number.
  EXPECT_EQ(table.Find("/x"), dir);
  EXPECT_TRUE(table.Get(dir)->is_dir);
}

TEST(InodeTableTest, MoveRenumbersNothingAndCarriesChildrenAlong) {
  InodeTable table;
  const uint64_t dir = table.Ref("/runs", true);
  const uint64_t child = table.Ref("/runs/ckpt", false);
  const uint64_t sibling = table.Ref("/runsx", false);  // Shares a prefix, not a parent.
  const uint64_t replaced = table.Ref("/done", true);
  const uint64_t replaced_child = table.Ref("/done/old", false);
  table.Move("/runs", "/done");
  EXPECT_EQ(table.Find("/done"), dir);
  EXPECT_EQ(table.Find("/done/ckpt"), child);
  EXPECT_EQ(table.Get(child)->path, "/done/ckpt");
  EXPECT_EQ(table.Find("/runs"), 0u);
  EXPECT_EQ(table.Find("/runs/ckpt"), 0u);
  EXPECT_EQ(table.Find("/runsx"), sibling);
  EXPECT_EQ(table.Find("/done/old"), 0u);
  // The replaced numbers live on for the kernel's references, and forgetting them leaves the
  // moved entries' paths alone.
  ASSERT_TRUE(table.Get(replaced).has_value());
  table.Forget(replaced, 1);
  table.Forget(replaced_child, 1);
  EXPECT_FALSE(table.Get(replaced).has_value());
  EXPECT_EQ(table.Find("/done"), dir);
  EXPECT_EQ(table.Ref("/done/ckpt", false), child);
}

TEST(InodeTableTest, OpenVersionDecidesKeepCache) {
  InodeTable table;
  const uint64_t a = table.Ref("/a", false);
  bool drop = true;
  EXPECT_FALSE(table.RecordOpenVersion(a, "v1", &drop));  // First open: nothing cached to keep,
  EXPECT_FALSE(drop);                                     // and nothing to drop.
  EXPECT_TRUE(table.RecordOpenVersion(a, "v1", &drop));
  EXPECT_FALSE(drop);
  EXPECT_FALSE(table.RecordOpenVersion(a, "v2", &drop));  // Changed: v1's pages must go.
  EXPECT_TRUE(drop);
  table.InvalidationDone(a);
  EXPECT_TRUE(table.RecordOpenVersion(a, "v2", &drop));
  EXPECT_FALSE(table.RecordOpenVersion(999, "v1", &drop));
  EXPECT_FALSE(drop);
  // A re-created inode starts over.
  table.Forget(a, 1);
  const uint64_t b = table.Ref("/a", false);
  EXPECT_FALSE(table.RecordOpenVersion(b, "v2", &drop));
  EXPECT_FALSE(drop);
}

// An open of the new version must not keep the kernel's cache while another thread is still
// dropping the old version's pages from it (the drop runs after the epoch changed, outside
// the reply gate): it would read old pages that are about to go. CI once saw a new open read
// its first 256 KiB mixed.
TEST(InodeTableTest, NoOpenKeepsTheCacheWhileADropIsInFlight) {
  InodeTable table;
  const uint64_t a = table.Ref("/a", false);
  bool drop = false;
  EXPECT_FALSE(table.RecordOpenVersion(a, "v1", &drop));
  EXPECT_TRUE(table.RecordOpenVersion(a, "v1", &drop));
  // A stat sees v2: new epoch, a drop starts (not finished yet).
  EXPECT_TRUE(table.NoteStatVersion(a, "v2"));
  EXPECT_FALSE(table.RecordOpenVersion(a, "v2", &drop));  // Tainted (and the drop in flight).
  EXPECT_TRUE(drop);
  EXPECT_FALSE(table.RecordOpenVersion(a, "v2", &drop));  // Both drops still in flight.
  EXPECT_TRUE(drop);
  table.InvalidationDone(a);                              // The stat's.
  table.InvalidationDone(a);                              // The first open's.
  EXPECT_FALSE(table.RecordOpenVersion(a, "v2", &drop));  // The second open's is in flight.
  table.InvalidationDone(a);
  table.InvalidationDone(a);
  EXPECT_TRUE(table.RecordOpenVersion(a, "v2", &drop));
  EXPECT_FALSE(drop);
  // A read of an older epoch that replied after the change drops pages the same way.
  table.BeginInvalidation(a);
  EXPECT_FALSE(table.RecordOpenVersion(a, "v2", &drop));
  table.InvalidationDone(a);
  table.InvalidationDone(a);
  EXPECT_TRUE(table.RecordOpenVersion(a, "v2", &drop));
}

TEST(InodeTableTest, ReportedSize) {
  InodeTable table;
  const uint64_t a = table.Ref("/a", false);
  EXPECT_FALSE(table.ReportedSize(a).has_value());
  table.RecordReportedSize(a, 42);
  EXPECT_EQ(table.ReportedSize(a), 42u);
  EXPECT_FALSE(table.ReportedSize(777).has_value());
}

TEST(InodeTableTest, ConcurrentRefAndForgetBalance) {
  InodeTable table;
  constexpr int kThreads = 8;
  constexpr int kIters = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&table, t] {
      for (int i = 0; i < kIters; ++i) {
        const std::string path = "/f" + std::to_string((i + t) % 17);
        const uint64_t ino = table.Ref(path, false);
        EXPECT_EQ(table.Get(ino)->path, path);
        table.Forget(ino, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.size(), 1u);  // Only the root is left.
}

}  // namespace
}  // namespace cairn::fuse
