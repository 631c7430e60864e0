#include "membership/coordination_behaviour.h"

#include <atomic>
#include <thread>

namespace cairn::membership::testing {

WatchCallback WatchRecorder::Callback() {
  return [this](const WatchUpdate& u) {
    MutexLock lock(&mu_);
    ++updates_;
    if (!u.status.ok()) errors_.push_back(u.status);
    for (const WatchEvent& e : u.events) events_.push_back(e);
    cv_.NotifyAll();
  };
}

std::vector<WatchEvent> WatchRecorder::WaitForEvents(size_t n, std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  cv_.WaitFor(&mu_, timeout, [&]() REQUIRES(mu_) { return events_.size() >= n; });
  return events_;
}

std::vector<Status> WatchRecorder::errors() {
  MutexLock lock(&mu_);
  return errors_;
}

size_t WatchRecorder::updates() {
  MutexLock lock(&mu_);
  return updates_;
}

void CoordinationBehaviour::SetUp() {
  env_ = GetParam().make_env();
  ASSERT_NE(env_, nullptr);
  c_ = env_->client();
  other_ = env_->other_client();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  prefix_ = std::string("/test/") + info->name() + "/";
}

namespace {

TEST_P(CoordinationBehaviour, PutThenGetReturnsValueAndRevisions) {
  StatusOr<int64_t> r1 = c_->Put(Key("a"), "one");
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  StatusOr<KeyValue> kv = other_->Get(Key("a"));
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ(kv->value, "one");
  EXPECT_EQ(kv->mod_revision, *r1);
  EXPECT_EQ(kv->create_revision, *r1);
  StatusOr<int64_t> r2 = c_->Put(Key("a"), std::string("t\0wo", 4));
  ASSERT_TRUE(r2.ok());
  EXPECT_GT(*r2, *r1);
  kv = c_->Get(Key("a"));
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->value, std::string("t\0wo", 4));
  EXPECT_EQ(kv->mod_revision, *r2);
  EXPECT_EQ(kv->create_revision, *r1);
}

TEST_P(CoordinationBehaviour, GetOfMissingKeyIsNotFound) {
  EXPECT_EQ(c_->Get(Key("missing")).status().code(), StatusCode::kNotFound);
}

TEST_P(CoordinationBehaviour, GetPrefixReturnsSortedEntriesOnlyUnderPrefix) {
  ASSERT_TRUE(c_->Put(Key("dir/b"), "2").ok());
  ASSERT_TRUE(c_->Put(Key("dir/a"), "1").ok());
  StatusOr<int64_t> last = c_->Put(Key("dir0"), "outside");
  ASSERT_TRUE(last.ok());
  StatusOr<RangeResult> r = c_->GetPrefix(Key("dir/"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->entries.size(), 2u);
  EXPECT_EQ(r->entries[0].key, Key("dir/a"));
  EXPECT_EQ(r->entries[1].value, "2");
  EXPECT_GE(r->revision, *last);
  r = c_->GetPrefix(Key("nothing/"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->entries.empty());
}

TEST_P(CoordinationBehaviour, DeleteReportsWhetherTheKeyExisted) {
  ASSERT_TRUE(c_->Put(Key("d"), "x").ok());
  StatusOr<bool> d = c_->Delete(Key("d"));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d);
  EXPECT_EQ(c_->Get(Key("d")).status().code(), StatusCode::kNotFound);
  d = c_->Delete(Key("d"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(*d);
}

TEST_P(CoordinationBehaviour, CompareAndSwapWithZeroCreatesOnlyOnce) {
  StatusOr<int64_t> r = c_->CompareAndSwap(Key("m"), 0, "first");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(other_->CompareAndSwap(Key("m"), 0, "second").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(c_->Get(Key("m"))->value, "first");
}

TEST_P(CoordinationBehaviour, CompareAndSwapFailsAfterAConcurrentUpdate) {
  StatusOr<int64_t> r1 = c_->Put(Key("m"), "v1");
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(other_->Put(Key("m"), "theirs").ok());
  EXPECT_EQ(c_->CompareAndSwap(Key("m"), *r1, "mine").status().code(),
            StatusCode::kFailedPrecondition);
  StatusOr<KeyValue> now = c_->Get(Key("m"));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->value, "theirs");
  StatusOr<int64_t> r3 = c_->CompareAndSwap(Key("m"), now->mod_revision, "mine");
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(c_->Get(Key("m"))->mod_revision, *r3);
}

TEST_P(CoordinationBehaviour, ConcurrentCompareAndSwapIncrementsLoseNoUpdate) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 10;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Coordination* client = t % 2 == 0 ? c_ : other_;
    threads.emplace_back([&, client] {
      for (int i = 0; i < kIncrements; ++i) {
        while (true) {
          StatusOr<KeyValue> kv = client->Get(Key("counter"));
          int64_t rev = 0;
          int value = 0;
          if (kv.ok()) {
            rev = kv->mod_revision;
            value = std::stoi(kv->value);
          } else if (kv.status().code() != StatusCode::kNotFound) {
            ++failures;
            return;
          }
          StatusOr<int64_t> r =
              client->CompareAndSwap(Key("counter"), rev, std::to_string(value + 1));
          if (r.ok()) break;
          if (r.status().code() != StatusCode::kFailedPrecondition) {
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(c_->Get(Key("counter"))->value, std::to_string(kThreads * kIncrements));
}

TEST_P(CoordinationBehaviour, RevokedLeaseDeletesItsKeys) {
  StatusOr<int64_t> lease = c_->GrantLease(std::chrono::seconds(30));
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_TRUE(c_->Put(Key("l1"), "x", *lease).ok());
  ASSERT_TRUE(c_->Put(Key("l2"), "y", *lease).ok());
  ASSERT_TRUE(c_->Put(Key("plain"), "z").ok());
  EXPECT_EQ(c_->Get(Key("l1"))->lease_id, *lease);
  ASSERT_TRUE(other_->RevokeLease(*lease).ok());
  EXPECT_EQ(c_->Get(Key("l1")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c_->Get(Key("l2")).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(c_->Get(Key("plain")).ok());
  EXPECT_EQ(c_->KeepAlive(*lease).code(), StatusCode::kNotFound);
  EXPECT_EQ(c_->RevokeLease(*lease).code(), StatusCode::kNotFound);
  EXPECT_EQ(c_->Put(Key("l3"), "x", *lease).status().code(), StatusCode::kNotFound);
}

TEST_P(CoordinationBehaviour, LeaseNotKeptAliveExpiresAndItsKeyDisappears) {
  StatusOr<int64_t> lease = c_->GrantLease(std::chrono::seconds(1));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(c_->Put(Key("ephemeral"), "x", *lease).ok());
  WatchRecorder rec;
  auto watch = other_->Watch(Key(""), 0, rec.Callback());
  ASSERT_TRUE(watch.ok());
  env_->LetTimePass(std::chrono::milliseconds(3500));
  EXPECT_EQ(c_->Get(Key("ephemeral")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(c_->KeepAlive(*lease).code(), StatusCode::kNotFound);
  std::vector<WatchEvent> events = rec.WaitForEvents(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kDelete);
  EXPECT_EQ(events[0].key, Key("ephemeral"));
}

TEST_P(CoordinationBehaviour, KeepAliveHoldsTheLease) {
  StatusOr<int64_t> lease = c_->GrantLease(std::chrono::seconds(2));
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(c_->Put(Key("held"), "x", *lease).ok());
  for (int i = 0; i < 3; ++i) {
    env_->LetTimePass(std::chrono::milliseconds(1000));
    ASSERT_TRUE(c_->KeepAlive(*lease).ok());
  }
  EXPECT_TRUE(c_->Get(Key("held")).ok());
  ASSERT_TRUE(c_->RevokeLease(*lease).ok());
}

TEST_P(CoordinationBehaviour, GrantLeaseRejectsSubSecondTtl) {
  EXPECT_EQ(c_->GrantLease(std::chrono::seconds(0)).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(CoordinationBehaviour, WatchSeesPutsAndDeletesFromAnotherClientInOrder) {
  WatchRecorder rec;
  auto watch = c_->Watch(Key("w/"), 0, rec.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  StatusOr<int64_t> r1 = other_->Put(Key("w/a"), "1");
  StatusOr<int64_t> r2 = other_->Put(Key("w/b"), "2");
  ASSERT_TRUE(other_->Put(Key("elsewhere"), "x").ok());
  ASSERT_TRUE(other_->Delete(Key("w/a")).ok());
  StatusOr<int64_t> r4 = other_->Put(Key("w/b"), "3");
  ASSERT_TRUE(r1.ok() && r2.ok() && r4.ok());
  std::vector<WatchEvent> e = rec.WaitForEvents(4);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].type, EventType::kPut);
  EXPECT_EQ(e[0].key, Key("w/a"));
  EXPECT_EQ(e[0].value, "1");
  EXPECT_EQ(e[0].mod_revision, *r1);
  EXPECT_EQ(e[1].mod_revision, *r2);
  EXPECT_EQ(e[2].type, EventType::kDelete);
  EXPECT_EQ(e[2].key, Key("w/a"));
  EXPECT_EQ(e[2].mod_revision, *r2 + 2);  // The put outside the prefix took *r2 + 1.
  EXPECT_EQ(e[3].value, "3");
  EXPECT_EQ(e[3].mod_revision, *r4);
  EXPECT_TRUE(rec.errors().empty());
}

TEST_P(CoordinationBehaviour, WatchFromARevisionReplaysHistoryThenLiveChanges) {
  StatusOr<int64_t> r1 = c_->Put(Key("h/x"), "1");
  ASSERT_TRUE(c_->Put(Key("h/y"), "2").ok());
  WatchRecorder rec;
  auto watch = other_->Watch(Key("h/"), *r1, rec.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(c_->Put(Key("h/z"), "3").ok());
  std::vector<WatchEvent> e = rec.WaitForEvents(3);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].key, Key("h/x"));
  EXPECT_EQ(e[1].key, Key("h/y"));
  EXPECT_EQ(e[2].key, Key("h/z"));
}

TEST_P(CoordinationBehaviour, DestroyedWatchDeliversNothingMore) {
  WatchRecorder rec;
  {
    auto watch = c_->Watch(Key("gone/"), 0, rec.Callback());
    ASSERT_TRUE(watch.ok());
    ASSERT_TRUE(c_->Put(Key("gone/a"), "1").ok());
    ASSERT_EQ(rec.WaitForEvents(1).size(), 1u);
  }
  ASSERT_TRUE(c_->Put(Key("gone/b"), "2").ok());
  // A second watch sees the put, so an undelivered event for the first would have been sent.
  WatchRecorder probe;
  StatusOr<KeyValue> kv = c_->Get(Key("gone/b"));
  ASSERT_TRUE(kv.ok());
  auto second = c_->Watch(Key("gone/"), kv->mod_revision, probe.Callback());
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(probe.WaitForEvents(1).size(), 1u);
  EXPECT_EQ(rec.WaitForEvents(2, std::chrono::milliseconds(200)).size(), 1u);
}

}  // namespace
}  // namespace cairn::membership::testing
