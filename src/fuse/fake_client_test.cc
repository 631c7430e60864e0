#include "fuse/fake_client.h"

#include <gtest/gtest.h>

#include <set>

namespace cairn::fuse {
namespace {

std::string ReadAll(FileReader& reader) {
  std::string out;
  char buf[7];
  for (uint64_t off = 0;;) {
    StatusOr<size_t> n = reader.Read(off, std::span<char>(buf, sizeof(buf)));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    if (!n.ok() || *n == 0) break;
    out.append(buf, *n);
    off += *n;
  }
  return out;
}

TEST(FakeClientTest, StatAndOpenFollowTheNamespace) {
  FakeClient client;
  ASSERT_TRUE(client.PutFile("/a/b/c.txt", "hello", 123).ok());
  StatusOr<FileInfo> root = client.Stat("/");
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->is_dir);
  EXPECT_EQ(root->name, "");
  StatusOr<FileInfo> dir = client.Stat("/a/b");
  ASSERT_TRUE(dir.ok());
  EXPECT_TRUE(dir->is_dir);
  StatusOr<FileInfo> file = client.Stat("/a/b/c.txt");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->name, "c.txt");
  EXPECT_EQ(file->size, 5u);
  EXPECT_EQ(file->mtime_ns, 123);
  EXPECT_FALSE(file->version.empty());
  auto reader = client.Open("/a/b/c.txt");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(ReadAll(**reader), "hello");
  EXPECT_EQ(client.Stat("/a/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.Open("/a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Stat("a").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Stat("/a//b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Stat("/a/../b").status().code(), StatusCode::kInvalidArgument);
}

TEST(FakeClientTest, EditsRejectTypeConflicts) {
  FakeClient client;
  ASSERT_TRUE(client.PutFile("/f", "x").ok());
  EXPECT_EQ(client.PutFile("/f/g", "y").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(client.AddDir("/d").ok());
  EXPECT_EQ(client.PutFile("/d", "y").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(client.Remove("/zzz").code(), StatusCode::kNotFound);
  ASSERT_TRUE(client.PutFile("/d/e/f", "z").ok());
  ASSERT_TRUE(client.Remove("/d").ok());
  EXPECT_EQ(client.Stat("/d/e/f").status().code(), StatusCode::kNotFound);
}

TEST(FakeClientTest, ListingIsPagedSortedAndSkipsGrandchildren) {
  FakeClient client;
  for (const char* p : {"/d/b", "/d/a b", "/d/a/deep/x", "/d/a!", "/d/c", "/d/é"}) {
    ASSERT_TRUE(client.PutFile(p, "1").ok()) << p;
  }
  std::vector<std::string> names;
  std::string token;
  int pages = 0;
  do {
    StatusOr<DirPage> page = client.ListDir("/d", token, 2);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_LE(page->entries.size(), 2u);
    for (const FileInfo& e : page->entries) names.push_back(e.name);
    token = page->next_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "a b", "a!", "b", "c", "é"}));
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(client.ListDir("/d", "garbage", 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.ListDir("/nope", "", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.ListDir("/d/b", "", 2).status().code(), StatusCode::kInvalidArgument);
  StatusOr<DirPage> root = client.ListDir("/", "", 10);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->entries.size(), 1u);
  EXPECT_EQ(root->entries[0].name, "d");
  EXPECT_TRUE(root->entries[0].is_dir);
}

TEST(FakeClientTest, MetadataCacheServesStaleUntilTtlOrInvalidate) {
  FakeClock clock;
  FakeClientOptions options;
  options.clock = &clock;
  options.metadata_ttl = std::chrono::seconds(10);
  FakeClient client(options);
  ASSERT_TRUE(client.PutFile("/f", "one").ok());
  const std::string v1 = client.Stat("/f")->version;
  ASSERT_TRUE(client.PutFile("/f", "second").ok());
  EXPECT_EQ(client.Stat("/f")->version, v1);  // Cached.
  auto stale = client.Open("/f");
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(ReadAll(**stale), "one");  // Pinned to the cached version's bytes.
  clock.Advance(std::chrono::seconds(11));
  StatusOr<FileInfo> fresh = client.Stat("/f");
  EXPECT_NE(fresh->version, v1);
  EXPECT_EQ(fresh->size, 6u);
  ASSERT_TRUE(client.PutFile("/f", "third!!").ok());
  client.InvalidateMetadata("/");
  EXPECT_EQ(client.Stat("/f")->size, 7u);
  EXPECT_GT(client.Stats().metadata_hits, 0u);
}

TEST(FakeClientTest, ReadersCanFailAfterChange) {
  FakeClientOptions options;
  options.fail_reads_after_change = true;
  FakeClient client(options);
  ASSERT_TRUE(client.PutFile("/f", "one").ok());
  auto reader = client.Open("/f");
  ASSERT_TRUE(reader.ok());
  char buf[8];
  ASSERT_TRUE((*reader)->Read(0, std::span<char>(buf, 8)).ok());
  ASSERT_TRUE(client.PutFile("/f", "two").ok());
  EXPECT_EQ((*reader)->Read(0, std::span<char>(buf, 8)).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(FakeClientTest, ChunkLimitAndInjectedErrors) {
  FakeClientOptions options;
  options.read_chunk_limit = 3;
  FakeClient client(options);
  ASSERT_TRUE(client.PutFile("/f", "abcdefghij").ok());
  auto reader = client.Open("/f");
  ASSERT_TRUE(reader.ok());
  char buf[10];
  EXPECT_EQ(*(*reader)->Read(0, std::span<char>(buf, 10)), 3u);
  EXPECT_EQ(*(*reader)->Read(9, std::span<char>(buf, 10)), 1u);
  EXPECT_EQ(*(*reader)->Read(10, std::span<char>(buf, 10)), 0u);
  EXPECT_EQ(*(*reader)->Read(1000, std::span<char>(buf, 10)), 0u);
  EXPECT_EQ(ReadAll(**reader), "abcdefghij");
  client.InjectError("/f", PermissionDeniedError("no"));
  EXPECT_EQ(client.Stat("/f").status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*reader)->Read(0, std::span<char>(buf, 10)).status().code(),
            StatusCode::kPermissionDenied);
  client.InjectError("/f", Status::Ok());
  EXPECT_TRUE(client.Stat("/f").ok());
  EXPECT_GE(client.counters().read_calls, 5u);
}

}  // namespace
}  // namespace cairn::fuse
