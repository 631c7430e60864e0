// Readers of write-back files before their upload (docs/write-path.md, decision 7): the worker
// that holds a closed file shows it over the source's stats and listings under a pending
// version and serves its pages from the spool; once uploaded, a reader holding the pending
// version moves on to the committed one; a version from before a restart, of a removed file, or
// of another size is a change, never other bytes.
#include <gtest/gtest.h>

#include "worker/metadata_service.h"
#include "worker/write_back_fixture.h"

namespace cairn::worker {
namespace {

class PendingReadsTest : public WriteBackTest {
 protected:
  StatusOr<protocol::DirEntry> Stat(const std::string& path) {
    protocol::StatPathRequest r;
    r.path = path;
    CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply,
                           Metadata().Serve(r, auth::Visibility{true, {}}));
    if (reply.entries.size() != 1) return InternalError("not one entry");
    return reply.entries[0];
  }
  // Every entry of the listing of `path`, `max_entries` per page.
  StatusOr<std::vector<protocol::DirEntry>> List(const std::string& path,
                                                 uint32_t max_entries = 1000) {
    std::vector<protocol::DirEntry> all;
    protocol::ListDirRequest r;
    r.path = path;
    r.max_entries = max_entries;
    do {
      CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply,
                             Metadata().Serve(r, auth::Visibility{true, {}}));
      for (auto& e : reply.entries) all.push_back(std::move(e));
      r.token = reply.next_token;
    } while (!r.token.empty());
    return all;
  }
  // The whole file `key` of /lake as version `version` of `size` bytes, page by page.
  StatusOr<std::string> Read(const std::string& key, const std::string& version, uint64_t size) {
    std::string out;
    for (uint64_t page = 0; page * kPage < size; ++page) {
      protocol::ReadPageRequest r;
      r.page = {"/lake", key, version, size, page, kPage};
      r.length = static_cast<uint32_t>(std::min<uint64_t>(kPage, size - page * kPage));
      CAIRN_ASSIGN_OR_RETURN(PageResult result, pages_->ReadPage(r));
      std::string bytes(r.length, '\0');
      CAIRN_RETURN_IF_ERROR(result.CopyTo(bytes));
      out += bytes;
    }
    return out;
  }

  // Made in the test body: the fixture's SetUp makes the page service.
  MetadataService Metadata() { return MetadataService(pages_.get()); }
};

TEST_F(PendingReadsTest, AClosedFileReadsBeforeAndAfterItsUpload) {
  SourceDown(true);  // Uploads fail; stats and listings of the source still work.
  const std::string content = testing::RandomBytes(2 * kPage + 1000, 7);
  ASSERT_TRUE(WriteFile("/lake/ckpt/step-1.pt", content).ok());
  ASSERT_FALSE(InSource("ckpt/step-1.pt"));

  auto stat = Stat("/lake/ckpt/step-1.pt");
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_FALSE(stat->is_dir);
  EXPECT_EQ(stat->size, content.size());
  ASSERT_TRUE(protocol::IsPendingVersion(stat->version)) << stat->version;
  EXPECT_GT(stat->mtime_ns, 0);
  // The folder exists only through the pending file.
  auto folder = Stat("/lake/ckpt");
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  EXPECT_TRUE(folder->is_dir);
  auto root = List("/lake");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  ASSERT_EQ(root->size(), 1u);
  EXPECT_EQ((*root)[0].name, "ckpt");
  EXPECT_TRUE((*root)[0].is_dir);
  auto listed = List("/lake/ckpt");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "step-1.pt");
  EXPECT_EQ((*listed)[0].version, stat->version);

  auto before = Read("ckpt/step-1.pt", stat->version, content.size());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(*before, content);

  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  ASSERT_EQ(Content("ckpt/step-1.pt"), content);
  // A reader that opened the pending version reads on: the same bytes, now the source's.
  auto after = Read("ckpt/step-1.pt", stat->version, content.size());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, content);
  auto uploaded = Stat("/lake/ckpt/step-1.pt");
  ASSERT_TRUE(uploaded.ok());
  EXPECT_FALSE(protocol::IsPendingVersion(uploaded->version));
  EXPECT_EQ(uploaded->size, content.size());
}

TEST_F(PendingReadsTest, APendingFileShowsOverTheSourcesOlderObjectOnItsListingPage) {
  memory_->Put("data/a", "old a");
  memory_->Put("data/c", "old c");
  memory_->Put("data/e", "old e");
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/data/c", "new content of c").ok());  // Replaces.
  ASSERT_TRUE(WriteFile("/lake/data/b", "b").ok());                 // Between two names.
  ASSERT_TRUE(WriteFile("/lake/data/z", "z").ok());                 // After every name.
  ASSERT_TRUE(WriteFile("/lake/data/0", "0").ok());                 // Before every name.
  for (uint32_t per_page : {1000u, 1u, 2u}) {
    auto listed = List("/lake/data", per_page);
    ASSERT_TRUE(listed.ok()) << listed.status().ToString();
    std::vector<std::string> names;
    for (const auto& e : *listed) names.push_back(e.name);
    // Each name once; new names on the last page (sorted within a page, not across pages).
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"0", "a", "b", "c", "e", "z"})) << per_page;
    for (const auto& e : *listed) {
      if (e.name == "c") {
        EXPECT_EQ(e.size, 16u);
        EXPECT_TRUE(protocol::IsPendingVersion(e.version));
      }
      if (e.name == "a") {
        EXPECT_FALSE(protocol::IsPendingVersion(e.version));
      }
    }
  }
  auto c = Stat("/lake/data/c");
  ASSERT_TRUE(c.ok());
  auto read = Read("data/c", c->version, c->size);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, "new content of c");
  // A pending file is not a folder.
  protocol::ListDirRequest r;
  r.path = "/lake/data/c";
  EXPECT_EQ(Metadata().Serve(r, auth::Visibility{true, {}}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(PendingReadsTest, AVersionThatIsNoLongerPendingHereIsAChange) {
  SourceDown(true);
  const std::string content = testing::RandomBytes(kPage + 5, 8);
  ASSERT_TRUE(WriteFile("/lake/x.bin", content).ok());
  auto stat = Stat("/lake/x.bin");
  ASSERT_TRUE(stat.ok());
  // The wrong size, another path, garbage: never bytes.
  EXPECT_EQ(Read("x.bin", stat->version, content.size() + 1).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read("y.bin", stat->version, content.size()).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Read("x.bin", "cairn-pending-zz-1", content.size()).status().code(),
            StatusCode::kInvalidArgument);
  // Loading a pending page into the cache is refused with a reason (it is not in the source).
  protocol::LoadPageRequest load;
  load.page = {"/lake", "x.bin", stat->version, content.size(), 0, kPage};
  EXPECT_EQ(pages_->LoadPage(load).status().code(), StatusCode::kFailedPrecondition);

  // After a restart the file is pending again, under a new version; the old one is a change.
  writes_.reset();
  Start();
  EXPECT_EQ(Read("x.bin", stat->version, content.size()).status().code(),
            StatusCode::kFailedPrecondition);
  auto again = Stat("/lake/x.bin");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->version, stat->version);
  auto read = Read("x.bin", again->version, content.size());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, content);

  // Removed: gone for stats, a change for its readers.
  ASSERT_TRUE(Remove("/lake/x.bin").ok());
  EXPECT_EQ(Stat("/lake/x.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Read("x.bin", again->version, content.size()).status().code(),
            StatusCode::kFailedPrecondition);

  // Without a write service nothing is pending here.
  writes_.reset();
  EXPECT_EQ(Read("x.bin", again->version, content.size()).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(PendingVersionTest, RoundTripsAndRefusesAnythingElse) {
  const std::string v = protocol::PendingVersion(0xabcdef0123456789ull, 42);
  EXPECT_EQ(v, "cairn-pending-abcdef0123456789-2a");
  auto parts = protocol::ParsePendingVersion(v);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->epoch, 0xabcdef0123456789ull);
  EXPECT_EQ(parts->id, 42u);
  for (const char* bad :
       {"", "cairn-pending-", "cairn-pending-1", "cairn-pending-1-", "cairn-pending--1",
        "cairn-pending-1-2-3", "cairn-pending-A-1", "cairn-pending-0x1-1",
        "cairn-pending-11111111111111111-1", "\"etag\"", "cairn-pending-1-g"}) {
    EXPECT_FALSE(protocol::ParsePendingVersion(bad).ok()) << bad;
  }
  EXPECT_FALSE(protocol::IsPendingVersion("\"d41d8cd98f00b204e9800998ecf8427e\""));
}

}  // namespace
}  // namespace cairn::worker
