#include "client/metadata_cache.h"

#include <gtest/gtest.h>

namespace cairn::client {
namespace {

TEST(MetadataCacheTest, ExpiresAfterTtlAndCachesNotFound) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  FileInfo info;
  info.name = "a";
  info.size = 3;
  cache.PutStat("/m/a", info, 1000);
  cache.PutStat("/m/missing", NotFoundError("gone"), 1000);
  ASSERT_TRUE(cache.GetStat("/m/a").has_value());
  EXPECT_EQ(cache.GetStat("/m/a")->value().size, 3u);
  EXPECT_EQ(cache.GetStat("/m/missing")->status().code(), StatusCode::kNotFound);
  clock.Advance(std::chrono::microseconds(1001));
  EXPECT_FALSE(cache.GetStat("/m/a").has_value());
  cache.PutStat("/m/zero", info, 0);  // TTL 0: never cached.
  EXPECT_FALSE(cache.GetStat("/m/zero").has_value());
}

// Only a "no such file" asked of the source for that very path, and recently, is what a create
// may pass on as seen (OpenWriteRequest::seen_absent).
TEST(MetadataCacheTest, FreshlyAbsentOnlyForARecentAskedNotFound) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  const int64_t ttl = 60'000'000, window = 1'000'000;
  cache.PutStat("/m/new", NotFoundError("none"), ttl);
  cache.PutStat("/m/listed", NotFoundError("not on the page"), ttl,
                MetadataCache::StatOrigin::kDerived);
  cache.PutStat("/m/there", FileInfo{}, ttl);
  cache.PutStat("/m/denied", PermissionDeniedError("no"), ttl);
  EXPECT_TRUE(cache.FreshlyAbsent("/m/new", window));
  EXPECT_FALSE(cache.FreshlyAbsent("/m/listed", window));
  EXPECT_FALSE(cache.FreshlyAbsent("/m/there", window));
  EXPECT_FALSE(cache.FreshlyAbsent("/m/denied", window));
  EXPECT_FALSE(cache.FreshlyAbsent("/m/unknown", window));

  MetadataCache child(&clock, 100);  // A forked child's cache: when it was asked is unknown.
  child.Import(*cache.Export(100));
  EXPECT_EQ(child.GetStat("/m/new")->status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(child.FreshlyAbsent("/m/new", window));

  clock.Advance(std::chrono::microseconds(window + 1));
  EXPECT_TRUE(cache.GetStat("/m/new").has_value());  // Still cached, no longer fresh.
  EXPECT_FALSE(cache.FreshlyAbsent("/m/new", window));
}

FileInfo Named(const std::string& name, uint64_t size = 1, bool dir = false) {
  FileInfo info;
  info.name = name;
  info.size = size;
  info.is_dir = dir;
  info.version = "v" + std::to_string(size);
  return info;
}

std::vector<std::string> Names(const std::optional<DirPage>& page) {
  std::vector<std::string> out;
  if (page) {
    for (const FileInfo& e : page->entries) out.push_back(e.name);
  }
  return out;
}

// A file this client committed goes into the cached page of its parent that holds its name's
// place (or replaces its entry there); a removed one leaves it. Its own stat is the new state.
TEST(MetadataCacheTest, CommitsAndRemovesPatchTheParentsCachedListing) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  const int64_t ttl = 60'000'000;
  cache.PutList("/m/d", "", DirPage{{Named("a"), Named("c")}, "t2"}, ttl);
  cache.PutList("/m/d", "t2", DirPage{{Named("e"), Named("g")}, ""}, ttl);
  cache.NoteCommitted("/m/d/b", Named("ignored", 5), ttl);
  cache.NoteCommitted("/m/d/f", Named("f", 6), ttl);
  cache.NoteCommitted("/m/d/z", Named("z", 7), ttl);
  cache.NoteCommitted("/m/d/c", Named("c", 8), ttl);  // Replaced.
  EXPECT_EQ(Names(cache.GetList("/m/d", "")), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Names(cache.GetList("/m/d", "t2")), (std::vector<std::string>{"e", "f", "g", "z"}));
  EXPECT_EQ(cache.GetList("/m/d", "")->entries[2].size, 8u);
  ASSERT_TRUE(cache.GetStat("/m/d/b").has_value());
  EXPECT_EQ(cache.GetStat("/m/d/b")->value().size, 5u);
  EXPECT_EQ(cache.GetStat("/m/d/b")->value().name, "b");
  EXPECT_FALSE(cache.FreshlyAbsent("/m/d/b", ttl));

  cache.NoteRemoved("/m/d/e", ttl);
  EXPECT_EQ(Names(cache.GetList("/m/d", "t2")), (std::vector<std::string>{"f", "g", "z"}));
  EXPECT_EQ(cache.GetStat("/m/d/e")->status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(cache.FreshlyAbsent("/m/d/e", ttl));  // Derived: a create still asks the source.
  cache.NoteRemoved("/m/d/never-there", ttl);
  EXPECT_EQ(Names(cache.GetList("/m/d", "")), (std::vector<std::string>{"a", "b", "c"}));
}

// Where the chain of pages up to the name's place is not all cached (or a directory holds the
// name), the parent's pages are dropped instead: they would otherwise miss the file.
TEST(MetadataCacheTest, ACommitThatCannotPatchTheListingDropsIt) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  const int64_t ttl = 60'000'000;
  cache.PutList("/m/d", "t2", DirPage{{Named("e")}, ""}, ttl);  // The first page is not cached.
  cache.NoteCommitted("/m/d/f", Named("f"), ttl);
  EXPECT_FALSE(cache.GetList("/m/d", "t2").has_value());
  EXPECT_TRUE(cache.GetStat("/m/d/f").has_value());

  cache.PutList("/m/d", "", DirPage{{Named("sub", 0, true)}, ""}, ttl);
  cache.NoteCommitted("/m/d/sub", Named("sub"), ttl);
  EXPECT_FALSE(cache.GetList("/m/d", "").has_value());

  cache.PutList("/m/d", "", DirPage{{Named("a")}, ""}, ttl);
  clock.Advance(std::chrono::microseconds(ttl + 1));  // Expired pages are not patched.
  cache.NoteCommitted("/m/d/b", Named("b"), ttl);
  EXPECT_FALSE(cache.GetList("/m/d", "").has_value());
}

// A file written into a new folder makes the folders above it exist: what the cache said of
// them before (absent; a listing of the folder above without them) must not deny it (a library
// client wrote /m/new/deeper/f, then stat'ed /m/new: "no such file or directory").
TEST(MetadataCacheTest, ACommitMakesTheFoldersAboveItExist) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  const int64_t ttl = 60'000'000;
  cache.PutList("/m", "", DirPage{{Named("x")}, ""}, ttl);
  cache.PutStat("/m/new", NotFoundError("absent"), ttl);
  cache.PutStat("/m/new/deeper", NotFoundError("absent"), ttl);
  cache.PutList("/keep", "", DirPage{{Named("a")}, ""}, ttl);
  cache.NoteCommitted("/m/new/deeper/f", Named("f"), ttl);
  EXPECT_FALSE(cache.GetStat("/m/new").has_value());
  EXPECT_FALSE(cache.GetStat("/m/new/deeper").has_value());
  EXPECT_FALSE(cache.GetList("/m", "").has_value());
  EXPECT_TRUE(cache.GetList("/keep", "").has_value());
  EXPECT_TRUE(cache.GetStat("/m/new/deeper/f").has_value());
  // A folder its parent's listing shows ends the climb: the listings above stay.
  cache.PutList("/m", "", DirPage{{Named("new", 0, true)}, ""}, ttl);
  cache.PutList("/m/new", "", DirPage{{Named("deeper", 0, true)}, ""}, ttl);
  cache.NoteCommitted("/m/new/deeper/g", Named("g"), ttl);
  EXPECT_TRUE(cache.GetList("/m", "").has_value());
  EXPECT_TRUE(cache.GetList("/m/new", "").has_value());
}

TEST(MetadataCacheTest, InvalidateDropsPathAndBelowOnly) {
  FakeClock clock;
  MetadataCache cache(&clock, 100);
  FileInfo info;
  cache.PutStat("/m/d/x", info, 1000000);
  cache.PutStat("/m/dx", info, 1000000);
  cache.PutList("/m/d", "", DirPage{}, 1000000);
  cache.Invalidate("/m/d");
  EXPECT_FALSE(cache.GetStat("/m/d/x").has_value());
  EXPECT_FALSE(cache.GetList("/m/d", "").has_value());
  EXPECT_TRUE(cache.GetStat("/m/dx").has_value());
}

TEST(MetadataCacheTest, BoundedByEntries) {
  FakeClock clock;
  MetadataCache cache(&clock, 10);
  FileInfo info;
  for (int i = 0; i < 50; ++i) cache.PutStat("/p" + std::to_string(i), info, 1000000);
  EXPECT_FALSE(cache.GetStat("/p0").has_value());
  EXPECT_TRUE(cache.GetStat("/p49").has_value());
}

// A forked child's client starts with its parent's cache: what has not expired, with the same
// expiry, newest entries kept when they do not all fit.
TEST(MetadataCacheTest, ExportedEntriesSeedAnotherCacheWithTheirExpiry) {
  FakeClock clock;
  MetadataCache parent(&clock, 100);
  FileInfo info;
  info.name = "a";
  info.size = 7;
  parent.PutStat("/m/a", info, 1000);
  parent.PutStat("/m/missing", NotFoundError("gone"), 5000);
  parent.PutStat("/m/stale", info, 10);
  DirPage page;
  page.entries.push_back(info);
  page.next_token = "t";
  parent.PutList("/m", "", page, 5000);
  clock.Advance(std::chrono::microseconds(100));  // /m/stale has expired.
  std::shared_ptr<const MetadataSeed> seed = parent.Export(100);
  ASSERT_NE(seed, nullptr);
  EXPECT_EQ(seed->items.size(), 3u);

  MetadataCache child(&clock, 100);
  child.Import(*seed);
  EXPECT_EQ(child.GetStat("/m/a")->value().size, 7u);
  EXPECT_EQ(child.GetStat("/m/missing")->status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(child.GetStat("/m/stale").has_value());
  ASSERT_TRUE(child.GetList("/m", "").has_value());
  EXPECT_EQ(child.GetList("/m", "")->next_token, "t");
  clock.Advance(std::chrono::microseconds(1000));  // Past /m/a's expiry in the parent.
  EXPECT_FALSE(child.GetStat("/m/a").has_value());
  EXPECT_TRUE(child.GetStat("/m/missing").has_value());

  MetadataCache small(&clock, 1);
  small.Import(*seed);
  EXPECT_FALSE(small.GetStat("/m/missing").has_value());
  EXPECT_TRUE(small.GetList("/m", "").has_value());  // The newest.

  std::shared_ptr<const MetadataSeed> newest = parent.Export(2);  // The newest two, in order.
  ASSERT_EQ(newest->items.size(), 2u);
  EXPECT_EQ(newest->items[0].key, "/m/missing");
  EXPECT_EQ(newest->items[1].key, std::string("/m\0", 3));
}

}  // namespace
}  // namespace cairn::client
