// Readers of write-back files before their upload (docs/write-path.md, decision 7): the worker
// that holds a closed file shows it over the source's stats and listings under a pending
// version and serves its pages from the spool; once uploaded, a reader holding the pending
// version moves on to the committed one; a version from before a restart, of a removed file, or
// of another size is a change, never other bytes.
#include <gtest/gtest.h>

#include "worker/local_channel.h"
#include "worker/metadata_service.h"
#include "worker/peer_set.h"
#include "worker/write_back_fixture.h"

namespace cairn::worker {
namespace {

class PendingReadsTest : public WriteBackTest {
 protected:
  StatusOr<protocol::DirEntry> Stat(const std::string& path) {
    MetadataService metadata = Metadata();
    return StatAt(metadata, path);
  }
  StatusOr<protocol::DirEntry> StatAt(MetadataService& metadata, const std::string& path) {
    protocol::StatPathRequest r;
    r.path = path;
    CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply,
                           metadata.Serve(r, auth::Visibility{true, {}}));
    if (reply.entries.size() != 1) return InternalError("not one entry");
    return reply.entries[0];
  }
  // Every entry of the listing of `path`, `max_entries` per page.
  StatusOr<std::vector<protocol::DirEntry>> List(const std::string& path,
                                                 uint32_t max_entries = 1000) {
    MetadataService metadata = Metadata();
    return ListAt(metadata, path, max_entries);
  }
  StatusOr<std::vector<protocol::DirEntry>> ListAt(MetadataService& metadata,
                                                   const std::string& path,
                                                   uint32_t max_entries = 1000) {
    std::vector<protocol::DirEntry> all;
    protocol::ListDirRequest r;
    r.path = path;
    r.max_entries = max_entries;
    do {
      CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply,
                             metadata.Serve(r, auth::Visibility{true, {}}));
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

namespace cairn::worker {
namespace {

// Worker "a" (the fixture) as a peer of another worker: its ListPending answers, or Unavailable
// while `down`.
class PeerChannel : public protocol::PageChannel {
 public:
  explicit PeerChannel(PageService* a) : local_(a) {}
  void Call(const protocol::Request& r, std::span<char> dest, Callback done) override {
    local_.Call(r, dest, std::move(done));
  }
  void CallMetadata(const protocol::MetadataRequest& r, MetadataCallback done) override {
    ++calls;
    if (down) return done(UnavailableError("peer a is down"));
    local_.CallMetadata(r, std::move(done));
  }
  std::string Describe() const override { return "peer a"; }
  std::atomic<bool> down{false};
  std::atomic<int> calls{0};

 private:
  LocalChannel local_;
};

// A worker with no pending files of its own.
class NoPendingFiles : public PendingFiles {
 public:
  std::optional<Entry> PendingStat(const std::string&) override { return std::nullopt; }
  std::vector<Entry> PendingUnder(const std::string&) override { return {}; }
  StatusOr<Page> ReadPendingPage(const protocol::PageRef&, uint32_t) override {
    return FailedPreconditionError("nothing pending here");
  }
};

// A write-back file waits at the owner of its own path ("a", the fixture); a listing is answered
// by the owner of the folder ("b" here), which asks the other workers for theirs.
TEST_F(PendingReadsTest, TheFoldersOwnerShowsFilesPendingAtOtherWorkers) {
  FakeClock clock;
  auto to_a = std::make_shared<PeerChannel>(pages_.get());
  PeerSet peers("b", [&](const std::string&) { return to_a; });
  ASSERT_TRUE(peers.SetWorkers({{"a", "127.0.0.1:1", 1.0}, {"b", "127.0.0.1:2", 1.0}}).ok());
  PageServiceOptions po;
  po.page_size = kPage;
  po.peers = &peers;
  po.clock = &clock;
  metrics::Registry b_registry;
  PageService b(mounts_, store_.get(), &b_registry, po);
  NoPendingFiles none;
  b.SetPendingFiles(&none);
  MetadataService owner(&b);

  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/ckpt/step-2/shard-0.pt", "zero").ok());
  ASSERT_TRUE(WriteFile("/lake/ckpt/step-2/deep/shard-1.pt", "one").ok());
  auto listed = ListAt(owner, "/lake/ckpt/step-2");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "deep");
  EXPECT_TRUE((*listed)[0].is_dir);
  EXPECT_EQ((*listed)[1].name, "shard-0.pt");
  EXPECT_FALSE((*listed)[1].is_dir);
  EXPECT_EQ((*listed)[1].size, 4u);
  EXPECT_TRUE(protocol::IsPendingVersion((*listed)[1].version)) << (*listed)[1].version;
  // The same version a stat at the file's own owner gives (its reads go there).
  auto at_a = Stat("/lake/ckpt/step-2/shard-0.pt");
  ASSERT_TRUE(at_a.ok());
  EXPECT_EQ((*listed)[1].version, at_a->version);
  // Folders that hold only pending files, elsewhere, are folders here too.
  auto folder = StatAt(owner, "/lake/ckpt/step-2/deep");
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();
  EXPECT_TRUE(folder->is_dir);
  auto root = ListAt(owner, "/lake");
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->size(), 1u);
  EXPECT_EQ((*root)[0].name, "ckpt");

  // A peer that fails is left out, and not asked again for a while.
  to_a->down = true;
  EXPECT_EQ(ListAt(owner, "/lake/ckpt/step-2").status().code(), StatusCode::kNotFound);
  to_a->down = false;
  const int calls = to_a->calls;
  EXPECT_EQ(StatAt(owner, "/lake/ckpt/step-2").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(to_a->calls, calls);
  // Counted: the failure, then the listing that left the resting peer out.
  EXPECT_EQ(testing::MetricValue(b_registry.ExposeText(), PeerPending::kFailuresMetric), 2);
  clock.Advance(PeerPending::kQuietAfterFailure + std::chrono::seconds(1));
  listed = ListAt(owner, "/lake/ckpt/step-2");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), 2u);

  // Once uploaded, the source's entries.
  SourceDown(false);
  ASSERT_TRUE(SyncAll().ok());
  listed = ListAt(owner, "/lake/ckpt/step-2");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_FALSE(protocol::IsPendingVersion((*listed)[1].version));
}

// ListPending answers with this worker's own pending files only, as children of the folder.
TEST_F(PendingReadsTest, ListPendingAnswersTheWorkersOwnFilesAsChildren) {
  SourceDown(true);
  ASSERT_TRUE(WriteFile("/lake/out/a.txt", "aa").ok());
  ASSERT_TRUE(WriteFile("/lake/out/sub/b.txt", "b").ok());
  MetadataService metadata = Metadata();
  protocol::ListPendingRequest r;
  r.path = "/lake/out";
  auto reply = metadata.Serve(r, auth::Visibility{true, {}});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->entries.size(), 2u);
  EXPECT_EQ(reply->entries[0].name, "a.txt");
  EXPECT_EQ(reply->entries[0].size, 2u);
  EXPECT_EQ(reply->entries[1].name, "sub");
  EXPECT_TRUE(reply->entries[1].is_dir);
  r.path = "/lake/elsewhere";
  reply = metadata.Serve(r, auth::Visibility{true, {}});
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->entries.empty());
  r.path = "/no-such-mount/x";  // Not an error: nothing of its own there.
  reply = metadata.Serve(r, auth::Visibility{true, {}});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->entries.empty());
}

}  // namespace
}  // namespace cairn::worker
