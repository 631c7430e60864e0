#include "membership/memory_coordination.h"

#include <gtest/gtest.h>

#include "common/clock.h"
#include "membership/coordination_behaviour.h"

namespace cairn::membership {
namespace {

using testing::BehaviourParam;
using testing::CoordinationBehaviour;
using testing::CoordinationEnv;
using testing::WatchRecorder;

class MemoryEnv : public CoordinationEnv {
 public:
  Coordination* client() override { return &store_; }
  Coordination* other_client() override { return &store_; }
  void LetTimePass(std::chrono::milliseconds d) override {
    clock_.Advance(d);
    store_.ExpireLeases();
  }

 private:
  FakeClock clock_;
  MemoryCoordination store_{&clock_};
};

INSTANTIATE_TEST_SUITE_P(Memory, CoordinationBehaviour,
                         ::testing::Values(BehaviourParam{
                             "memory", [] { return std::make_unique<MemoryEnv>(); }}),
                         [](const auto& info) { return info.param.name; });

TEST(MemoryCoordinationTest, LeaseExpiresExactlyAtTtlOnTheFakeClock) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  StatusOr<int64_t> lease = store.GrantLease(std::chrono::seconds(5));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store.Put("k", "v", *lease).ok());
  clock.Advance(std::chrono::milliseconds(4999));
  EXPECT_TRUE(store.Get("k").ok());
  clock.Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kNotFound);
}

TEST(MemoryCoordinationTest, LeaseExpiryDeletesAllItsKeysInOneRevision) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  StatusOr<int64_t> lease = store.GrantLease(std::chrono::seconds(1));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(store.Put("p/a", "1", *lease).ok());
  ASSERT_TRUE(store.Put("p/b", "2", *lease).ok());
  WatchRecorder rec;
  auto watch = store.Watch("p/", 0, rec.Callback());
  ASSERT_TRUE(watch.ok());
  const int64_t before = store.revision();
  clock.Advance(std::chrono::seconds(2));
  store.ExpireLeases();
  std::vector<WatchEvent> e = rec.WaitForEvents(2);
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(rec.updates(), 1u);
  EXPECT_EQ(e[0].mod_revision, before + 1);
  EXPECT_EQ(e[1].mod_revision, before + 1);
  EXPECT_EQ(store.revision(), before + 1);
}

TEST(MemoryCoordinationTest, PutWithoutLeaseDetachesTheKeyFromItsLease) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  StatusOr<int64_t> lease = store.GrantLease(std::chrono::seconds(1));
  ASSERT_TRUE(store.Put("k", "v", *lease).ok());
  ASSERT_TRUE(store.Put("k", "w").ok());
  ASSERT_TRUE(store.RevokeLease(*lease).ok());
  EXPECT_EQ(store.Get("k")->value, "w");
}

TEST(MemoryCoordinationTest, UnavailableStoreFailsEveryCall) {
  MemoryCoordination store;
  store.SetUnavailable(true);
  EXPECT_EQ(store.Put("k", "v").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Get("k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.GrantLease(std::chrono::seconds(5)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Watch("", 0, [](const WatchUpdate&) {}).status().code(),
            StatusCode::kUnavailable);
  store.SetUnavailable(false);
  EXPECT_TRUE(store.Put("k", "v").ok());
}

TEST(MemoryCoordinationTest, WatchFromACompactedRevisionFails) {
  MemoryCoordination store;
  for (size_t i = 0; i < MemoryCoordination::kHistoryLimit + 10; ++i) {
    ASSERT_TRUE(store.Put("k", "v").ok());
  }
  EXPECT_EQ(store.Watch("", 1, [](const WatchUpdate&) {}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store.Watch("", store.revision(), [](const WatchUpdate&) {}).ok());
}

TEST(MemoryCoordinationTest, CallbackMayCallBackIntoTheStore) {
  MemoryCoordination store;
  WatchRecorder mirror_rec;
  auto mirror_watch = store.Watch("mirror/", 0, mirror_rec.Callback());
  ASSERT_TRUE(mirror_watch.ok());
  auto watch = store.Watch("src/", 0, [&](const WatchUpdate& u) {
    for (const WatchEvent& e : u.events) {
      store.Put("mirror/" + e.key.substr(4), e.value).status().IgnoreError();
    }
  });
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(store.Put("src/a", "1").ok());
  std::vector<WatchEvent> e = mirror_rec.WaitForEvents(1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].key, "mirror/a");
}

}  // namespace
}  // namespace cairn::membership
