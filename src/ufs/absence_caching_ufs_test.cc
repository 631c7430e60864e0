#include "ufs/absence_caching_ufs.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "ufs/counting_ufs.h"
#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::ufs {
namespace {

using std::chrono::seconds;

// Runs `during_list` after the store under it answered a List and before the answer returns:
// a write that lands while a listing is in flight.
class HookedUnderStorage : public UnderStorageWrapper {
 public:
  using UnderStorageWrapper::UnderStorageWrapper;
  StatusOr<ListResult> List(const ListOptions& options) override {
    StatusOr<ListResult> listed = UnderStorageWrapper::List(options);
    if (during_list) std::exchange(during_list, nullptr)();
    return listed;
  }
  std::function<void()> during_list;
};

class AbsenceCachingUfsTest : public ::testing::Test {
 protected:
  AbsenceCachingUfsTest()
      : memory_(std::make_shared<MemoryUnderStorage>("mem://test", &clock_)),
        hooked_(std::make_shared<HookedUnderStorage>(memory_)),
        counting_(std::make_shared<CountingUnderStorage>(hooked_)) {
    Make({});
  }

  void Make(AbsenceCacheOptions options) {
    options.ttl = seconds(5);
    store_ = std::make_shared<AbsenceCachingUnderStorage>(counting_, options, &clock_);
  }

  // What the worker asks for a name: a HEAD, then whether it is a directory.
  StatusCode Lookup(const std::string& key) {
    StatusOr<ObjectInfo> info = store_->Stat(key);
    if (info.ok()) return StatusCode::kOk;
    if (info.status().code() != StatusCode::kNotFound) return info.status().code();
    ListOptions probe;
    probe.prefix = key + "/";
    probe.max_keys = 1;
    StatusOr<ListResult> under = store_->List(probe);
    if (!under.ok()) return under.status().code();
    const bool dir =
        !under->objects.empty() || !under->common_prefixes.empty() || under->directory_exists;
    return dir ? StatusCode::kOk : StatusCode::kNotFound;
  }

  void Put(UnderStorage& store, const std::string& key, const std::string& data = "x") {
    ASSERT_TRUE(store.Write(key, data).ok());
  }

  FakeClock clock_;
  std::shared_ptr<MemoryUnderStorage> memory_;
  std::shared_ptr<HookedUnderStorage> hooked_;
  std::shared_ptr<CountingUnderStorage> counting_;
  std::shared_ptr<AbsenceCachingUnderStorage> store_;
};

TEST_F(AbsenceCachingUfsTest, NewNamesInOneFolderCostOneListing) {
  Put(*memory_, "ckpt/existing");
  counting_->Reset();
  EXPECT_EQ(Lookup("ckpt/shard-000"), StatusCode::kNotFound);
  const UfsCounts first = counting_->counts();
  EXPECT_EQ(first.stats, 1u);  // The HEAD,
  EXPECT_EQ(first.lists, 1u);  // one LIST of the folder, which also answered the probe.
  for (int i = 1; i < 50; ++i) {
    EXPECT_EQ(Lookup("ckpt/shard-" + std::to_string(i)), StatusCode::kNotFound);
  }
  EXPECT_EQ(counting_->counts().requests(), first.requests());
  EXPECT_EQ(store_->stats().absent_answers, 1u + 49u * 2u);
  // Deeper new paths are absent too: their folder is not in the listing.
  EXPECT_EQ(Lookup("ckpt/new-dir/file"), StatusCode::kNotFound);
  EXPECT_EQ(counting_->counts().requests(), first.requests());
}

TEST_F(AbsenceCachingUfsTest, WhatExistsIsAlwaysAskedOfTheSource) {
  Put(*memory_, "ckpt/a", "one");
  Put(*memory_, "ckpt/dir/inner");
  EXPECT_EQ(Lookup("ckpt/new"), StatusCode::kNotFound);  // Lists the folder.
  counting_->Reset();
  StatusOr<ObjectInfo> before = store_->Stat("ckpt/a");
  ASSERT_TRUE(before.ok());
  Put(*memory_, "ckpt/a", "changed");  // Behind the cache's back.
  StatusOr<ObjectInfo> after = store_->Stat("ckpt/a");
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->version, before->version);
  EXPECT_EQ(Lookup("ckpt/dir"), StatusCode::kOk);  // A directory: HEAD, then the probe.
  EXPECT_EQ(counting_->counts().stats, 3u);
  EXPECT_EQ(counting_->counts().lists, 1u);
}

TEST_F(AbsenceCachingUfsTest, WritesThroughItShowAtOnceWithTheirFolders) {
  EXPECT_EQ(Lookup("ckpt/a"), StatusCode::kNotFound);
  Put(*store_, "ckpt/a");
  EXPECT_EQ(Lookup("ckpt/a"), StatusCode::kOk);
  // A write two levels down makes its folder appear in the cached listing's place.
  EXPECT_EQ(Lookup("ckpt/sub"), StatusCode::kNotFound);
  Put(*store_, "ckpt/sub/deep/file");
  EXPECT_EQ(Lookup("ckpt/sub"), StatusCode::kOk);
  EXPECT_EQ(Lookup("ckpt/sub/deep/file"), StatusCode::kOk);
  ASSERT_TRUE(store_->Delete("ckpt/a").ok());
  EXPECT_EQ(Lookup("ckpt/a"), StatusCode::kNotFound);
  ASSERT_TRUE(store_->MakeDir("ckpt/made").ok());
  EXPECT_EQ(Lookup("ckpt/made"), StatusCode::kOk);
  Put(*store_, "ckpt/from");
  EXPECT_EQ(Lookup("ckpt/to"), StatusCode::kNotFound);
  ASSERT_TRUE(store_->Rename("ckpt/from", "ckpt/to", {}).ok());
  EXPECT_EQ(Lookup("ckpt/to"), StatusCode::kOk);
  EXPECT_EQ(Lookup("ckpt/from"), StatusCode::kNotFound);
}

TEST_F(AbsenceCachingUfsTest, AFailedCommitStillMakesTheNameAskTheSource) {
  EXPECT_EQ(Lookup("ckpt/raced"), StatusCode::kNotFound);
  Put(*memory_, "ckpt/raced", "someone else's");  // Unseen: the cache still says absent.
  EXPECT_EQ(Lookup("ckpt/raced"), StatusCode::kNotFound);
  WriterOptions exclusive;
  exclusive.condition = WriteCondition::Absent();
  StatusOr<std::unique_ptr<ObjectWriter>> writer = store_->StartWrite("ckpt/raced", exclusive);
  ASSERT_TRUE(writer.ok());
  EXPECT_FALSE((*writer)->Commit(1, std::span<const char>("y", 1)).ok());
  EXPECT_EQ(Lookup("ckpt/raced"), StatusCode::kOk);
}

TEST_F(AbsenceCachingUfsTest, AbsenceIsForgottenAfterTheTtl) {
  EXPECT_EQ(Lookup("ckpt/late"), StatusCode::kNotFound);
  Put(*memory_, "ckpt/late");
  clock_.Advance(seconds(4));
  EXPECT_EQ(Lookup("ckpt/late"), StatusCode::kNotFound);  // Up to the TTL old.
  clock_.Advance(seconds(1));
  EXPECT_EQ(Lookup("ckpt/late"), StatusCode::kOk);
}

TEST_F(AbsenceCachingUfsTest, AListingThatAWriteOvertookIsNotKept) {
  Put(*memory_, "ckpt/old");
  // The listing is taken, then a write through the cache lands before the listing returns: the
  // listing does not hold the new name and must not be kept.
  hooked_->during_list = [this] { Put(*store_, "ckpt/new"); };
  EXPECT_EQ(Lookup("ckpt/new"), StatusCode::kNotFound);  // Answered before the write.
  EXPECT_EQ(store_->stats().listings_dropped, 1u);
  EXPECT_EQ(Lookup("ckpt/new"), StatusCode::kOk);
}

TEST_F(AbsenceCachingUfsTest, AFolderOverOnePageAnswersNothing) {
  for (int i = 0; i < 1001; ++i) Put(*memory_, "big/f" + std::to_string(10000 + i));
  counting_->Reset();
  EXPECT_EQ(Lookup("big/new-1"), StatusCode::kNotFound);
  EXPECT_EQ(Lookup("big/new-2"), StatusCode::kNotFound);
  const UfsCounts counts = counting_->counts();
  EXPECT_EQ(counts.stats, 2u);
  EXPECT_EQ(counts.lists, 3u);  // One page of the folder, then each name's probe.
  EXPECT_EQ(store_->stats().folders_listed, 1u);
  EXPECT_EQ(store_->stats().absent_answers, 0u);
}

TEST_F(AbsenceCachingUfsTest, ListingsOfAFolderPassingThroughAreUsed) {
  Put(*memory_, "data/a");
  ListOptions whole;
  whole.prefix = "data/";
  ASSERT_TRUE(store_->List(whole).ok());
  counting_->Reset();
  EXPECT_EQ(Lookup("data/b"), StatusCode::kNotFound);
  EXPECT_EQ(counting_->counts().requests(), 0u);
  // A second page, a recursive listing, a prefix that is not a folder, or a short page that
  // stopped before the folder's end teach nothing (and do not mark the folder as too large).
  Make({});
  Put(*memory_, "data/c");
  ListOptions short_page = whole;
  short_page.max_keys = 1;
  ASSERT_TRUE(store_->List(short_page).ok());
  EXPECT_EQ(Lookup("data/b"), StatusCode::kNotFound);  // Lists the folder itself, whole.
  EXPECT_EQ(store_->stats().folders_listed, 1u);
  EXPECT_EQ(store_->stats().listings_kept, 1u);
  Make({});
  ListOptions partial = whole;
  partial.prefix = "data/a";
  ASSERT_TRUE(store_->List(partial).ok());
  ListOptions recursive = whole;
  recursive.delimiter = "";
  ASSERT_TRUE(store_->List(recursive).ok());
  EXPECT_EQ(store_->stats().listings_kept, 0u);
}

TEST_F(AbsenceCachingUfsTest, RenamingOrRemovingADirectoryDropsTheListingsBelowIt) {
  EXPECT_EQ(Lookup("a/b/x"), StatusCode::kNotFound);  // Lists "a/b".
  Put(*memory_, "a/b/x");                             // Unseen.
  ASSERT_FALSE(store_->RemoveDir("a").ok());          // Not empty; still a change below "a".
  EXPECT_EQ(Lookup("a/b/x"), StatusCode::kOk);
}

TEST_F(AbsenceCachingUfsTest, KeepsAtMostMaxFoldersListings) {
  AbsenceCacheOptions options;
  options.max_folders = 2;
  Make(options);
  EXPECT_EQ(Lookup("one/x"), StatusCode::kNotFound);
  clock_.Advance(seconds(1));
  EXPECT_EQ(Lookup("two/x"), StatusCode::kNotFound);
  clock_.Advance(seconds(1));
  EXPECT_EQ(Lookup("three/x"), StatusCode::kNotFound);  // Drops "one", the first to expire.
  counting_->Reset();
  EXPECT_EQ(Lookup("two/y"), StatusCode::kNotFound);
  EXPECT_EQ(Lookup("three/y"), StatusCode::kNotFound);
  EXPECT_EQ(counting_->counts().requests(), 0u);
  EXPECT_EQ(Lookup("one/y"), StatusCode::kNotFound);
  EXPECT_GT(counting_->counts().requests(), 0u);
}

// While the source cannot be reached: listings up to outage_ttl old answer for new names and
// for folders (write-back mounts keep creating files through a lake outage).
class AbsenceCachingOutageTest : public AbsenceCachingUfsTest {
 protected:
  void MakeWithOutage(std::chrono::microseconds outage_ttl) {
    faults_ = std::make_shared<FaultInjectingUnderStorage>(memory_, /*seed=*/1);
    AbsenceCacheOptions options;
    options.ttl = seconds(5);
    options.outage_ttl = outage_ttl;
    store_ = std::make_shared<AbsenceCachingUnderStorage>(faults_, options, &clock_);
  }
  void Down(bool down) {
    FaultSpec spec;
    spec.failure_probability = down ? 1.0 : 0.0;
    faults_->SetFaultAll(spec);
  }
  std::shared_ptr<FaultInjectingUnderStorage> faults_;
};

TEST_F(AbsenceCachingOutageTest, OlderListingsAnswerForNewNamesAndFolders) {
  MakeWithOutage(std::chrono::hours(1));
  Put(*memory_, "ckpt/step-1.pt");
  Put(*memory_, "ckpt/logs/run.txt");
  EXPECT_EQ(Lookup("ckpt/step-2.pt"), StatusCode::kNotFound);  // Lists "ckpt".
  clock_.Advance(std::chrono::minutes(30));                    // Long past the TTL.
  Down(true);
  EXPECT_EQ(Lookup("ckpt/step-3.pt"), StatusCode::kNotFound);
  EXPECT_EQ(Lookup("ckpt/logs"), StatusCode::kOk);  // A directory.
  EXPECT_EQ(store_->stats().outage_answers, 4u);    // Each: the stat and the probe.
  // What is there cannot be described from a listing; what was never listed is not known.
  EXPECT_EQ(Lookup("ckpt/step-1.pt"), StatusCode::kUnavailable);
  EXPECT_EQ(Lookup("other/x"), StatusCode::kUnavailable);
  // A listing of a folder known absent is empty; of one known there, not known.
  ListOptions under;
  under.prefix = "ckpt/step-3.pt/";
  ASSERT_TRUE(store_->List(under).ok());
  EXPECT_TRUE(store_->List(under)->objects.empty());
  under.prefix = "ckpt/logs/";
  EXPECT_EQ(store_->List(under).status().code(), StatusCode::kUnavailable);
  // Up to outage_ttl old.
  clock_.Advance(std::chrono::minutes(31));
  EXPECT_EQ(Lookup("ckpt/step-3.pt"), StatusCode::kUnavailable);
}

TEST_F(AbsenceCachingOutageTest, NamesWrittenSinceTheListingAnswerNothing) {
  MakeWithOutage(std::chrono::hours(1));
  EXPECT_EQ(Lookup("ckpt/a.pt"), StatusCode::kNotFound);  // Lists "ckpt" (empty).
  ASSERT_TRUE(store_->Write("ckpt/a.pt", std::string("weights")).ok());
  ASSERT_TRUE(store_->Write("ckpt/deep/b.pt", std::string("more")).ok());
  Down(true);
  EXPECT_EQ(Lookup("ckpt/a.pt"), StatusCode::kUnavailable);  // Written: an object now.
  EXPECT_EQ(Lookup("ckpt/deep"), StatusCode::kOk);           // Above a write: a folder.
  EXPECT_EQ(Lookup("ckpt/c.pt"), StatusCode::kNotFound);
  Down(false);
  EXPECT_EQ(Lookup("ckpt/a.pt"), StatusCode::kOk);
}

// Each question sent to an unreachable source costs its retries (a lookup waited for them every
// time): once one failed, what listings can answer is answered without asking, for
// outage_recheck; what they cannot answer still asks, and an answer from the source ends it.
TEST_F(AbsenceCachingOutageTest, AfterAFailureListingsAnswerWithoutAskingUntilTheRecheck) {
  MakeWithOutage(std::chrono::hours(1));
  EXPECT_EQ(Lookup("ckpt/a.pt"), StatusCode::kNotFound);  // Lists "ckpt" (empty).
  clock_.Advance(seconds(6));
  Down(true);
  EXPECT_EQ(Lookup("ckpt/b.pt"), StatusCode::kNotFound);  // Asked once, failed: answered.
  const auto asked = [&] { return faults_->calls(UfsOp::kStat) + faults_->calls(UfsOp::kList); };
  const uint64_t before = asked();
  EXPECT_EQ(Lookup("ckpt/c.pt"), StatusCode::kNotFound);
  EXPECT_EQ(Lookup("ckpt/d.pt"), StatusCode::kNotFound);
  EXPECT_EQ(asked(), before);                              // Not asked.
  EXPECT_EQ(Lookup("other/x"), StatusCode::kUnavailable);  // No listing: asked.
  EXPECT_GT(asked(), before);
  // Past the recheck (5 s after the last failure) the next question asks again.
  clock_.Advance(seconds(6));
  const uint64_t probe = asked();
  EXPECT_EQ(Lookup("ckpt/e.pt"), StatusCode::kNotFound);
  EXPECT_GT(asked(), probe);
  // The source answers again: questions go to it at once.
  Down(false);
  EXPECT_EQ(Lookup("other/x"), StatusCode::kNotFound);
  Down(true);
  const uint64_t after = asked();
  EXPECT_EQ(Lookup("ckpt/f.pt"), StatusCode::kNotFound);  // Asked (and failed: answered).
  EXPECT_GT(asked(), after);
}

TEST_F(AbsenceCachingOutageTest, WithoutOutageTtlAnOutageIsAnError) {
  MakeWithOutage(std::chrono::microseconds(0));
  EXPECT_EQ(Lookup("ckpt/a.pt"), StatusCode::kNotFound);
  clock_.Advance(seconds(6));
  Down(true);
  EXPECT_EQ(Lookup("ckpt/b.pt"), StatusCode::kUnavailable);
  EXPECT_EQ(store_->stats().outage_answers, 0u);
}

}  // namespace
}  // namespace cairn::ufs
