#include "membership/mount_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "membership/memory_coordination.h"
#include "membership/records.h"

namespace cairn::membership {
namespace {

using std::chrono::seconds;

// A real folder for file:// roots, removed at the end.
class MountStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "mount_store_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  MountSpec Spec(std::string path) const {
    MountSpec m;
    m.path = std::move(path);
    m.uri = "file://" + root_;
    return m;
  }

  std::string root_;
  MemoryCoordination store_;
  MountStore mounts_{&store_};
};

MountSpec MountAt(std::string path, std::string uri) {
  MountSpec m;
  m.path = std::move(path);
  m.uri = std::move(uri);
  return m;
}

std::vector<std::string> Paths(const std::vector<MountSpec>& mounts) {
  std::vector<std::string> out;
  for (const MountSpec& m : mounts) out.push_back(m.path);
  return out;
}

TEST_F(MountStoreTest, AbsentTableListsEmpty) {
  StatusOr<std::vector<MountSpec>> list = mounts_.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());
}

TEST_F(MountStoreTest, AddStoresOneDocumentWithNormalisedPaths) {
  MountSpec a = Spec("/datasets//a/");
  a.replicas = 3;
  a.metadata_ttl = seconds(5);
  ASSERT_TRUE(mounts_.Add(a).ok());
  MountSpec s3;
  s3.path = "/lake";
  s3.uri = "s3://bucket-a/prefix";
  s3.options = {{"endpoint", "http://127.0.0.1:9000"}, {"region", "eu-west-1"}};
  s3.read_only = false;  // Write-through.
  Status st = mounts_.Add(s3);
  ASSERT_TRUE(st.ok()) << st.ToString();
  StatusOr<std::vector<MountSpec>> list = mounts_.List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(Paths(*list), (std::vector<std::string>{"/datasets/a", "/lake"}));
  EXPECT_EQ((*list)[0].replicas, 3);
  EXPECT_EQ((*list)[0].metadata_ttl, seconds(5));
  EXPECT_EQ((*list)[1].options.at("region"), "eu-west-1");
  EXPECT_TRUE((*list)[0].read_only);
  EXPECT_FALSE((*list)[1].read_only);
  // Everything is in the single table key.
  StatusOr<RangeResult> all = store_.GetPrefix("/cairn/");
  ASSERT_EQ(all->entries.size(), 1u);
  EXPECT_EQ(all->entries[0].key, kMountTableKey);
}

TEST_F(MountStoreTest, ExistingPathIsAlreadyExistsUnlessReplaced) {
  ASSERT_TRUE(mounts_.Add(Spec("/a")).ok());
  MountSpec changed = Spec("/a/");
  changed.replicas = 2;
  EXPECT_EQ(mounts_.Add(changed).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(mounts_.Add(changed, /*replace=*/true).ok());
  EXPECT_EQ(mounts_.List()->at(0).replicas, 2);
  // Replacing with an identical spec writes nothing.
  const int64_t rev = store_.Get(kMountTableKey)->mod_revision;
  ASSERT_TRUE(mounts_.Add(changed, /*replace=*/true).ok());
  EXPECT_EQ(store_.Get(kMountTableKey)->mod_revision, rev);
}

TEST_F(MountStoreTest, NestedMountsAreRejected) {
  ASSERT_TRUE(mounts_.Add(Spec("/a")).ok());
  EXPECT_EQ(mounts_.Add(Spec("/a/b")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mounts_.Add(Spec("/")).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(mounts_.Add(Spec("/ab")).ok());  // A sibling sharing a prefix is fine.
  EXPECT_EQ(Paths(*mounts_.List()), (std::vector<std::string>{"/a", "/ab"}));
}

TEST_F(MountStoreTest, BadSpecsAreRejectedWithoutWriting) {
  for (const char* secret : {"access_key", "secret_key", "session_token"}) {
    MountSpec m = Spec("/a");
    m.options[secret] = "x";
    Status st = mounts_.Add(m);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << secret;
    EXPECT_NE(st.message().find("secrets are not stored in etcd"), std::string::npos)
        << st.ToString();
  }
  for (int replicas : {0, 9, -1}) {
    MountSpec m = Spec("/a");
    m.replicas = replicas;
    EXPECT_EQ(mounts_.Add(m).code(), StatusCode::kInvalidArgument) << replicas;
  }
  MountSpec unknown_option = Spec("/a");
  unknown_option.options["colour"] = "blue";
  EXPECT_EQ(mounts_.Add(unknown_option).code(), StatusCode::kInvalidArgument);
  MountSpec bad_scheme = Spec("/a");
  bad_scheme.uri = "ftp://host/x";
  EXPECT_EQ(mounts_.Add(bad_scheme).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mounts_.Add(Spec("relative")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mounts_.Add(Spec("/a/../b")).code(), StatusCode::kInvalidArgument);
  MountSpec bad_utf8 = Spec("/a");
  bad_utf8.options["region"] = "\xff";
  EXPECT_EQ(mounts_.Add(bad_utf8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Get(kMountTableKey).status().code(), StatusCode::kNotFound);
}

TEST_F(MountStoreTest, SourcesAreNotOpenedByTheEditor) {
  // The folder lives on the workers (an NFS path, say), not necessarily where `cairn mount add`
  // runs: the edit must not depend on it.
  MountSpec m = Spec("/a");
  m.uri = "file://" + root_ + "/does-not-exist";
  EXPECT_TRUE(mounts_.Add(m).ok());
}

TEST_F(MountStoreTest, RemoveDeletesOnlyThatMount) {
  ASSERT_TRUE(mounts_.Add(Spec("/a")).ok());
  ASSERT_TRUE(mounts_.Add(Spec("/b")).ok());
  EXPECT_EQ(mounts_.Remove("/c").code(), StatusCode::kNotFound);
  EXPECT_EQ(mounts_.Remove("c").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(mounts_.Remove("/a/").ok());
  EXPECT_EQ(Paths(*mounts_.List()), (std::vector<std::string>{"/b"}));
  ASSERT_TRUE(mounts_.Remove("/b").ok());
  // The document stays, empty.
  EXPECT_TRUE(store_.Get(kMountTableKey).ok());
  EXPECT_TRUE(mounts_.List()->empty());
  EXPECT_EQ(mounts_.Remove("/b").code(), StatusCode::kNotFound);
}

TEST_F(MountStoreTest, UnreachableStoreIsUnavailable) {
  store_.SetUnavailable(true);
  EXPECT_EQ(mounts_.List().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(mounts_.Add(Spec("/a")).code(), StatusCode::kUnavailable);
  EXPECT_EQ(mounts_.Remove("/a").code(), StatusCode::kUnavailable);
}

TEST_F(MountStoreTest, UndecodableStoredTableIsCorruption) {
  ASSERT_TRUE(store_.Put(kMountTableKey, "{not json").ok());
  EXPECT_EQ(mounts_.List().status().code(), StatusCode::kCorruption);
  EXPECT_EQ(mounts_.Add(Spec("/a")).code(), StatusCode::kCorruption);
  EXPECT_EQ(mounts_.Remove("/a").code(), StatusCode::kCorruption);
}

TEST_F(MountStoreTest, ConcurrentAddsAllLand) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MountStore own(&store_);  // Like separate `cairn mount` processes.
      for (int i = 0; i < kPerThread; ++i) {
        Status st = own.Add(Spec("/t" + std::to_string(t) + "/m" + std::to_string(i)));
        if (!st.ok()) {
          ++failures;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  StatusOr<std::vector<MountSpec>> list = mounts_.List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), static_cast<size_t>(kThreads * kPerThread));
}

// Another editor writes between this editor's read and its compare-and-swap, once.
class InterleavingStore : public MemoryCoordination {
 public:
  StatusOr<int64_t> CompareAndSwap(std::string_view key, int64_t expected, std::string_view value,
                                   int64_t lease) override {
    ++attempts;
    if (interfere_with_next) {
      interfere_with_next = false;
      EXPECT_TRUE(MemoryCoordination::Put(key, rival_table).ok());
    }
    return MemoryCoordination::CompareAndSwap(key, expected, value, lease);
  }
  std::string rival_table;
  bool interfere_with_next = false;
  int attempts = 0;
};

TEST_F(MountStoreTest, AConflictingEditIsReReadAndKept) {
  InterleavingStore store;
  MountStore mounts(&store);
  store.rival_table = EncodeMountTable({Spec("/rival")});
  store.interfere_with_next = true;
  ASSERT_TRUE(mounts.Add(Spec("/mine")).ok());
  EXPECT_EQ(store.attempts, 2);
  EXPECT_EQ(Paths(*mounts.List()), (std::vector<std::string>{"/rival", "/mine"}));
}

class AlwaysConflictingStore : public MemoryCoordination {
 public:
  StatusOr<int64_t> CompareAndSwap(std::string_view, int64_t, std::string_view, int64_t) override {
    ++attempts;
    return FailedPreconditionError("someone else won");
  }
  int attempts = 0;
};

TEST_F(MountStoreTest, EndlessConflictsGiveUpAfterABoundedNumberOfTries) {
  AlwaysConflictingStore store;
  MountStore mounts(&store);
  EXPECT_EQ(mounts.Add(Spec("/a")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.attempts, kMountEditAttempts);
}

TEST(ParseMountTableSnapshotTest, OnlyTheExactKeyCounts) {
  StatusOr<std::vector<MountSpec>> empty = ParseMountTableSnapshot({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  PrefixMirror::Snapshot other{{std::string(kMountTableKey) + "-old", "garbage"}};
  ASSERT_TRUE(ParseMountTableSnapshot(other).ok());
  EXPECT_TRUE(ParseMountTableSnapshot(other)->empty());

  MountSpec m = MountAt("/a", "file:///data");
  PrefixMirror::Snapshot snap{{std::string(kMountTableKey), EncodeMountTable({m})}};
  StatusOr<std::vector<MountSpec>> one = ParseMountTableSnapshot(snap);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(Paths(*one), (std::vector<std::string>{"/a"}));
}

TEST(ParseMountTableSnapshotTest, RejectsWhatTheStoreWouldRefuse) {
  MountSpec secret = MountAt("/a", "s3://b/p");
  secret.options["secret_key"] = "x";
  MountSpec replicas = MountAt("/a", "s3://b/p");
  replicas.replicas = 0;
  for (const MountSpec& m : {secret, replicas}) {
    PrefixMirror::Snapshot snap{{std::string(kMountTableKey), EncodeMountTable({m})}};
    EXPECT_EQ(ParseMountTableSnapshot(snap).status().code(), StatusCode::kInvalidArgument);
  }
  PrefixMirror::Snapshot junk{{std::string(kMountTableKey), "[]"}};
  EXPECT_EQ(ParseMountTableSnapshot(junk).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(MountStoreTest, AMirrorOfTheTableKeySeesEdits) {
  Mutex mu;
  std::vector<std::string> seen;
  auto mirror = PrefixMirror::Start(
      &store_, std::string(kMountTableKey), [&](const PrefixMirror::Snapshot& s) {
        StatusOr<std::vector<MountSpec>> t = ParseMountTableSnapshot(s);
        MutexLock lock(&mu);
        seen = t.ok() ? Paths(*t) : std::vector<std::string>{"!"};
      });
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  ASSERT_TRUE(mounts_.Add(Spec("/a")).ok());
  ASSERT_TRUE(mounts_.Add(Spec("/b")).ok());
  ASSERT_TRUE(mounts_.Remove("/a").ok());
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      MutexLock lock(&mu);
      if (seen == std::vector<std::string>{"/b"}) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  MutexLock lock(&mu);
  EXPECT_EQ(seen, std::vector<std::string>{"/b"});
}

}  // namespace
}  // namespace cairn::membership
