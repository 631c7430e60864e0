#include "fuse/inode_table.h"

#include <gtest/gtest.h>

#include <string>
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

FileInfo File(std::string version, uint64_t size) {
  FileInfo info;
  info.name = "f";
  info.version = std::move(version);
  info.size = size;
  info.mtime_ns = 1000;
  return info;
}

TEST(InodeTableTest, EachVersionOfAFileGetsItsOwnNumber) {
  InodeTable table;
  const uint64_t v1 = table.RefFile("/f", File("v1", 100), /*writing=*/false);
  EXPECT_EQ(table.RefFile("/f", File("v1", 100), false), v1);
  EXPECT_EQ(table.LookupCount(v1), 2u);
  const uint64_t v2 = table.RefFile("/f", File("v2", 300), false);
  EXPECT_NE(v2, v1);
  EXPECT_EQ(table.Find("/f"), v2);
  // The old number still resolves to the path and keeps showing its own version: a getattr
  // through it reports v1's size even though the path now holds v2.
  ASSERT_TRUE(table.Get(v1).has_value());
  EXPECT_EQ(table.Get(v1)->path, "/f");
  EXPECT_EQ(table.Shown(v1, File("v2", 300), false).size, 100u);
  EXPECT_EQ(table.Shown(v1, File("v2", 300), false).version, "v1");
  EXPECT_EQ(table.Shown(v2, File("v2", 300), false).size, 300u);
  // Forgetting the old number leaves the path to the new one.
  table.Forget(v1, 2);
  EXPECT_FALSE(table.Get(v1).has_value());
  EXPECT_EQ(table.RefFile("/f", File("v2", 300), false), v2);
}

TEST(InodeTableTest, AnOpenOfAnotherVersionIsStaleAndCountsNothing) {
  InodeTable table;
  const uint64_t v1 = table.RefFile("/f", File("v1", 100), false);
  InodeTable::ReaderOpen open = table.OpenReader(v1, File("v1", 100));
  EXPECT_FALSE(open.stale);
  EXPECT_TRUE(open.keep_cache);  // Its pages can only be v1's.
  EXPECT_FALSE(open.must_invalidate);
  EXPECT_TRUE(table.OpenReader(v1, File("v2", 300)).stale);
  EXPECT_TRUE(table.OpenReader(999, File("v1", 100)).stale);  // Unknown number.
  table.CloseReader(v1);
  // Stale opens counted nothing: with no reader left a writer's unfixing is adoptable.
  table.OpenWriter(v1);
  table.CloseWriter(v1);
  EXPECT_EQ(table.RefFile("/f", File("v3", 7), false), v1);
}

TEST(InodeTableTest, AWrittenFileKeepsItsNumberWhileWrittenAndIsFixedAfter) {
  InodeTable table;
  const uint64_t ino = table.RefNewFile("/ckpt");
  table.OpenWriter(ino);
  // While written here the number stays whatever a stat says (the source's older version).
  EXPECT_EQ(table.RefFile("/ckpt", File("old", 5), /*writing=*/true), ino);
  EXPECT_EQ(table.Shown(ino, File("old", 5), true).size, 5u);
  table.CloseWriter(ino);
  // The first stat after the writes fixes the committed version on the same number, and the
  // next open drops the pages the writes left (unverified), without keeping the cache.
  EXPECT_EQ(table.RefFile("/ckpt", File("committed", 64), false), ino);
  InodeTable::ReaderOpen first = table.OpenReader(ino, File("committed", 64));
  EXPECT_FALSE(first.stale);
  EXPECT_TRUE(first.must_invalidate);
  EXPECT_FALSE(first.keep_cache);
  // Another open while that drop is in flight must not keep the cache either.
  InodeTable::ReaderOpen during = table.OpenReader(ino, File("committed", 64));
  EXPECT_FALSE(during.must_invalidate);
  EXPECT_FALSE(during.keep_cache);
  table.InvalidationDone(ino);
  EXPECT_TRUE(table.OpenReader(ino, File("committed", 64)).keep_cache);
  // A create always gets a new number: the old one may be open on a removed file.
  EXPECT_NE(table.RefNewFile("/ckpt"), ino);
}

TEST(InodeTableTest, AnUnfixedNumberWithReadersIsNotAdopted) {
  InodeTable table;
  const uint64_t ino = table.RefFile("/log", File("v1", 10), false);
  ASSERT_FALSE(table.OpenReader(ino, File("v1", 10)).stale);
  table.OpenWriter(ino);  // Rewritten here while a reader pinned to v1 is open.
  InodeTable::ReaderOpen while_written = table.OpenReader(ino, File("v1", 10));
  EXPECT_FALSE(while_written.stale);
  EXPECT_FALSE(while_written.keep_cache);
  table.CloseWriter(ino);
  // The readers pinned to v1 may still feed this number's pages: v2 needs a new number.
  EXPECT_TRUE(table.OpenReader(ino, File("v2", 20)).stale);
  EXPECT_EQ(table.Shown(ino, File("v2", 20), false).size, 20u);  // Reported as is, unfixed.
  const uint64_t v2 = table.RefFile("/log", File("v2", 20), false);
  EXPECT_NE(v2, ino);
  table.CloseReader(ino);
  table.CloseReader(ino);
  EXPECT_FALSE(table.OpenReader(v2, File("v2", 20)).stale);
}

TEST(InodeTableTest, AnOpenReportsASizeTheKernelWasNotTold) {
  InodeTable table;
  const uint64_t ino = table.RefNewFile("/f");
  table.RecordReportedSize(ino, 10);
  InodeTable::ReaderOpen open = table.OpenReader(ino, File("v1", 12));  // Adopts v1.
  EXPECT_FALSE(open.stale);
  EXPECT_TRUE(open.size_changed);
  EXPECT_TRUE(open.must_invalidate);
  table.InvalidationDone(ino);
  table.RecordReportedSize(ino, 12);
  EXPECT_FALSE(table.OpenReader(ino, File("v1", 12)).size_changed);
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
