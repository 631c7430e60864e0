#include "mount/mount_table.h"

#include <gtest/gtest.h>

#include "ufs/memory_ufs.h"

namespace cairn::mount {
namespace {

MountSpec Spec(std::string path, std::string uri = "mem://x") {
  MountSpec s;
  s.path = std::move(path);
  s.uri = std::move(uri);
  return s;
}

std::shared_ptr<ufs::UnderStorage> Mem(std::string uri) {
  return std::make_shared<ufs::MemoryUnderStorage>(std::move(uri));
}

TEST(MountTableTest, NormalizesPaths) {
  EXPECT_EQ(*NormalizePath("/a//b/"), "/a/b");
  EXPECT_EQ(*NormalizePath("/"), "/");
  EXPECT_EQ(*NormalizePath("//"), "/");
  EXPECT_FALSE(NormalizePath("a/b").ok());
  EXPECT_FALSE(NormalizePath("/a/../b").ok());
  EXPECT_FALSE(NormalizePath("/a/./b").ok());
}

TEST(MountTableTest, ResolvesPathsUnderMountsAndVirtualDirs) {
  auto t =
      MountTable::CreateWith({Spec("/data/a"), Spec("/data/b/")}, {Mem("mem://a"), Mem("mem://b")});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = (*t)->Resolve("/data/a/x/y.bin");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mount->spec.path, "/data/a");
  EXPECT_EQ(r->key, "x/y.bin");
  EXPECT_EQ(r->mount->ObjectId(r->key), "mem://a/x/y.bin");
  EXPECT_EQ((*t)->Resolve("/data/b")->key, "");
  EXPECT_EQ((*t)->Resolve("/data")->mount, nullptr);
  EXPECT_EQ((*t)->Resolve("/")->mount, nullptr);
  EXPECT_EQ((*t)->Resolve("/elsewhere").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*t)->Resolve("/data/ab").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*t)->VirtualChildren("/"), std::vector<std::string>{"data"});
  EXPECT_EQ((*t)->VirtualChildren("/data"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE((*t)->FindByPath("/data/b").ok());
  EXPECT_FALSE((*t)->FindByPath("/data").ok());
}

TEST(MountTableTest, RootMountServesEverything) {
  auto t = MountTable::CreateWith({Spec("/")}, {Mem("mem://r")});
  ASSERT_TRUE(t.ok());
  auto r = (*t)->Resolve("/a/b");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->key, "a/b");
  EXPECT_EQ((*t)->Resolve("/")->key, "");
}

TEST(MountTableTest, RejectsBadTables) {
  EXPECT_FALSE(MountTable::CreateWith({Spec("/a"), Spec("/a/")}, {Mem("m1"), Mem("m2")}).ok());
  EXPECT_FALSE(MountTable::CreateWith({Spec("/a"), Spec("/a/b")}, {Mem("m1"), Mem("m2")}).ok());
  EXPECT_FALSE(MountTable::CreateWith({Spec("/"), Spec("/b")}, {Mem("m1"), Mem("m2")}).ok());
  EXPECT_FALSE(MountTable::CreateWith({Spec("relative")}, {Mem("m1")}).ok());
  auto unknown = MountTable::Create({Spec("/a", "ftp://host/x")});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  MountSpec bad_option = Spec("/a", "file:///tmp");
  bad_option.options["colour"] = "blue";
  EXPECT_EQ(MountTable::Create({bad_option}).status().code(), StatusCode::kInvalidArgument);
}

TEST(MountTableTest, EmptyTableHasAnEmptyRoot) {
  auto table = MountTable::CreateWith({}, {});
  ASSERT_TRUE(table.ok());
  auto root = (*table)->Resolve("/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->mount, nullptr);
  EXPECT_TRUE((*table)->VirtualChildren("/").empty());
  EXPECT_EQ((*table)->Resolve("/a").status().code(), StatusCode::kNotFound);
}

TEST(MountTableTest, ValidateChecksWithoutOpeningSources) {
  MountSpec a{"/a", "file:///does/not/exist/here", {}, std::chrono::seconds(1)};
  MountSpec b{
      "/b", "s3://bucket/prefix", {{"profile", "no-such-profile"}}, std::chrono::seconds(1)};
  EXPECT_TRUE(MountTable::Validate({a, b}).ok());
  MountSpec nested{"/a/x", "s3://bucket/x", {}, std::chrono::seconds(1)};
  EXPECT_EQ(MountTable::Validate({a, nested}).code(), StatusCode::kInvalidArgument);
  MountSpec scheme{"/c", "ftp://host/x", {}, std::chrono::seconds(1)};
  EXPECT_EQ(MountTable::Validate({scheme}).code(), StatusCode::kInvalidArgument);
  MountSpec option{"/d", "s3://bucket/x", {{"colour", "blue"}}, std::chrono::seconds(1)};
  EXPECT_EQ(MountTable::Validate({option}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MountTable::Validate({a, a}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::mount
