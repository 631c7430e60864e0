#include "mount/namespace_ops.h"

#include <gtest/gtest.h>

#include "ufs/memory_ufs.h"

namespace cairn::mount {
namespace {

class NamespaceOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_shared<ufs::MemoryUnderStorage>("mem://lake");
    MountSpec spec;
    spec.path = "/lake";
    spec.uri = "mem://lake";
    table_ = MountTable::CreateWith({spec}, {memory_}).value();
  }
  const Mount& mount() const { return *table_->mounts()[0]; }

  std::shared_ptr<ufs::MemoryUnderStorage> memory_;
  std::shared_ptr<const MountTable> table_;
};

std::vector<std::string> Names(const Listing& listing) {
  std::vector<std::string> out;
  for (const Entry& e : listing.entries) out.push_back(e.name + (e.is_dir ? "/" : ""));
  return out;
}

TEST_F(NamespaceOpsTest, StatTellsFilesDirectoriesAndNothingApart) {
  memory_->Put("d/f.bin", "12345");
  auto file = StatKey(mount(), "d/f.bin", "f.bin");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_FALSE(file->is_dir);
  EXPECT_EQ(file->size, 5u);
  EXPECT_EQ(file->version, memory_->Stat("d/f.bin")->version);
  auto dir = StatKey(mount(), "d", "d");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(dir->is_dir);
  EXPECT_EQ(dir->name, "d");
  EXPECT_EQ(StatKey(mount(), "nothing", "nothing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StatKey(mount(), "d/f", "f").status().code(), StatusCode::kNotFound);  // A prefix.
}

// An empty directory (a folder, an S3 "dir/" marker) is a directory: `mkdir d; touch d/f` on
// a write-back mount stats d through the worker (git clone did, and found no d).
TEST_F(NamespaceOpsTest, AnEmptyDirectoryIsADirectory) {
  ASSERT_TRUE(memory_->MakeDir("empty").ok());
  auto dir = StatKey(mount(), "empty", "empty");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(dir->is_dir);
}

TEST_F(NamespaceOpsTest, ListsOneDirectoryInPagesAndAnObjectShadowsItsPrefix) {
  for (std::string key : {"top", "a", "a/inner", "b/c/deep", "b/x", "c.bin"}) {
    memory_->Put(key, "v");
  }
  auto root = ListDirectory(mount(), "", "", 1000);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(Names(*root), (std::vector<std::string>{"a", "b/", "c.bin", "top"}));
  EXPECT_TRUE(root->next_token.empty());
  auto b = ListDirectory(mount(), "b", "", 1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Names(*b), (std::vector<std::string>{"c/", "x"}));

  for (int i = 0; i < 7; ++i) memory_->Put("many/f" + std::to_string(i), "v");
  std::vector<std::string> all;
  std::string token;
  int pages = 0;
  do {
    auto page = ListDirectory(mount(), "many", token, 3);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->entries.size(), 3u);
    for (auto& n : Names(*page)) all.push_back(n);
    token = page->next_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_EQ(all, (std::vector<std::string>{"f0", "f1", "f2", "f3", "f4", "f5", "f6"}));
}

TEST(SortUniqueByNameTest, SortsAndKeepsTheFirstOfEqualNames) {
  std::vector<Entry> entries = {{"b", false, 1, "v1", 0},
                                {"a", true, 0, "", 0},
                                {"b", true, 0, "", 0},
                                {"a", false, 2, "v2", 0}};
  SortUniqueByName(entries);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "a");
  EXPECT_TRUE(entries[0].is_dir) << "the first 'a' stays";
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_FALSE(entries[1].is_dir);
  EXPECT_EQ(entries[1].version, "v1");
}

}  // namespace
}  // namespace cairn::mount
