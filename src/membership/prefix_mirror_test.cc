#include "membership/prefix_mirror.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "common/clock.h"
#include "membership/memory_coordination.h"
#include "membership/worker_registry.h"

namespace cairn::membership {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Snapshot = PrefixMirror::Snapshot;

bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout = seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

MirrorOptions FastOptions() {
  MirrorOptions o;
  o.retry_min = milliseconds(2);
  o.retry_max = milliseconds(20);
  o.probe_interval = milliseconds(10);
  return o;
}

// Records every snapshot handed to on_change.
class ChangeLog {
 public:
  PrefixMirror::Callback Callback() {
    return [this](const Snapshot& s) {
      MutexLock lock(&mu_);
      calls_.push_back(s);
    };
  }
  size_t count() {
    MutexLock lock(&mu_);
    return calls_.size();
  }
  std::vector<Snapshot> calls() {
    MutexLock lock(&mu_);
    return calls_;
  }
  bool WaitForLast(const Snapshot& want, milliseconds timeout = seconds(5)) {
    return WaitUntil(
        [&] {
          MutexLock lock(&mu_);
          return !calls_.empty() && calls_.back() == want;
        },
        timeout);
  }

 private:
  Mutex mu_;
  std::vector<Snapshot> calls_ GUARDED_BY(mu_);
};

// Delegates to a MemoryCoordination and lets a test break its watches like a failing stream:
// Cut() drops every later event of the current watches, EndWatches() delivers their final error.
class BreakableCoordination : public Coordination {
 public:
  explicit BreakableCoordination(MemoryCoordination* inner) : inner_(inner) {}

  StatusOr<int64_t> Put(std::string_view k, std::string_view v, int64_t lease) override {
    return inner_->Put(k, v, lease);
  }
  StatusOr<KeyValue> Get(std::string_view k) override { return inner_->Get(k); }
  StatusOr<RangeResult> GetPrefix(std::string_view p) override { return inner_->GetPrefix(p); }
  StatusOr<bool> Delete(std::string_view k) override { return inner_->Delete(k); }
  StatusOr<int64_t> CompareAndSwap(std::string_view k, int64_t rev, std::string_view v,
                                   int64_t lease) override {
    return inner_->CompareAndSwap(k, rev, v, lease);
  }
  StatusOr<int64_t> GrantLease(std::chrono::seconds ttl) override {
    return inner_->GrantLease(ttl);
  }
  Status KeepAlive(int64_t lease) override { return inner_->KeepAlive(lease); }
  Status RevokeLease(int64_t lease) override { return inner_->RevokeLease(lease); }

  StatusOr<std::unique_ptr<WatchHandle>> Watch(std::string_view prefix, int64_t start,
                                               WatchCallback cb) override {
    auto tap = std::make_shared<Tap>();
    tap->callback = std::move(cb);
    auto watch = inner_->Watch(prefix, start, [tap](const WatchUpdate& u) { tap->Forward(u); });
    if (!watch.ok()) return watch.status();
    std::lock_guard<std::mutex> lock(mu_);
    taps_.push_back(tap);
    return std::unique_ptr<WatchHandle>(new Handle(std::move(watch).value(), tap));
  }

  void Cut() {
    for (auto& tap : Taps()) {
      std::lock_guard<std::mutex> lock(tap->mu);
      tap->cut = true;
    }
  }
  void EndWatches(const Status& st) {
    for (auto& tap : Taps()) tap->End(st);
  }
  size_t watches_started() {
    std::lock_guard<std::mutex> lock(mu_);
    return taps_.size();
  }

 private:
  struct Tap {
    std::mutex mu;  // Held while calling back: one call at a time, none after `done`.
    WatchCallback callback;
    bool cut = false;
    bool done = false;
    void Forward(const WatchUpdate& u) {
      std::lock_guard<std::mutex> lock(mu);
      if (!cut && !done) callback(u);
    }
    void End(const Status& st) {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      done = true;
      callback(WatchUpdate{st, {}});
    }
  };
  class Handle : public WatchHandle {
   public:
    Handle(std::unique_ptr<WatchHandle> inner, std::shared_ptr<Tap> tap)
        : inner_(std::move(inner)), tap_(std::move(tap)) {}
    ~Handle() override {
      inner_.reset();
      std::lock_guard<std::mutex> lock(tap_->mu);
      tap_->done = true;
    }

   private:
    std::unique_ptr<WatchHandle> inner_;
    std::shared_ptr<Tap> tap_;
  };
  std::vector<std::shared_ptr<Tap>> Taps() {
    std::lock_guard<std::mutex> lock(mu_);
    return taps_;
  }

  MemoryCoordination* const inner_;
  std::mutex mu_;
  std::vector<std::shared_ptr<Tap>> taps_;
};

TEST(PrefixMirrorTest, FirstListCallsOnChangeEvenWhenEmpty) {
  MemoryCoordination store;
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&store, "/p/", log.Callback(), FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  EXPECT_EQ(log.count(), 1u);
  EXPECT_TRUE(log.calls()[0].empty());
  EXPECT_TRUE(mirror->connected());
  EXPECT_EQ(mirror->resyncs(), 0u);
}

TEST(PrefixMirrorTest, FollowsPutsAndDeletesUnderThePrefixOnly) {
  MemoryCoordination store;
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ASSERT_TRUE(store.Put("/q/a", "other").ok());
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&store, "/p/", log.Callback(), FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  EXPECT_EQ(mirror->snapshot(), (Snapshot{{"/p/a", "1"}}));
  ASSERT_TRUE(store.Put("/p/b", "2").ok());
  ASSERT_TRUE(store.Put("/q/b", "outside").ok());
  ASSERT_TRUE(store.Delete("/p/a").ok());
  ASSERT_TRUE(store.Put("/p/b", "3").ok());
  const Snapshot want{{"/p/b", "3"}};
  ASSERT_TRUE(log.WaitForLast(want));
  EXPECT_EQ(mirror->snapshot(), want);
  // One call per change at most (quick changes may share one); never one for nothing.
  EXPECT_LE(log.count(), 4u);
}

TEST(PrefixMirrorTest, APutOfTheSameValueDoesNotCallOnChange) {
  MemoryCoordination store;
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&store, "/p/", log.Callback(), FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  store.WaitForWatchersIdle();
  std::this_thread::sleep_for(milliseconds(20));  // Let the mirror's thread apply it.
  EXPECT_EQ(log.count(), 1u);
  ASSERT_TRUE(store.Put("/p/z", "2").ok());
  ASSERT_TRUE(log.WaitForLast({{"/p/a", "1"}, {"/p/z", "2"}}));
  EXPECT_EQ(log.count(), 2u);
}

TEST(PrefixMirrorTest, StoreDownAtStartSyncsWhenItComesBack) {
  MemoryCoordination store;
  store.SetUnavailable(true);
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&store, "/p/", log.Callback(), FastOptions());
  EXPECT_FALSE(mirror->WaitForSync(milliseconds(50)));
  EXPECT_FALSE(mirror->connected());
  EXPECT_EQ(log.count(), 0u);
  store.SetUnavailable(false);
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  EXPECT_TRUE(mirror->connected());
  EXPECT_EQ(mirror->snapshot(), (Snapshot{{"/p/a", "1"}}));
}

TEST(PrefixMirrorTest, AnOutageKeepsTheSnapshotAndClearsConnected) {
  MemoryCoordination store;
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&store, "/p/", log.Callback(), FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  store.SetUnavailable(true);
  ASSERT_TRUE(WaitUntil([&] { return !mirror->connected(); }));
  EXPECT_EQ(mirror->snapshot(), (Snapshot{{"/p/a", "1"}}));
  store.SetUnavailable(false);
  ASSERT_TRUE(WaitUntil([&] { return mirror->connected(); }));
  // Whether the watch survived or had to be re-listed, nothing changed: no extra on_change.
  EXPECT_EQ(log.count(), 1u);
  ASSERT_TRUE(store.Put("/p/b", "2").ok());
  ASSERT_TRUE(log.WaitForLast({{"/p/a", "1"}, {"/p/b", "2"}}));
  EXPECT_EQ(log.count(), 2u);
}

TEST(PrefixMirrorTest, AnEndedWatchReListsAndReportsOnlyADifference) {
  MemoryCoordination store;
  BreakableCoordination breakable(&store);
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ChangeLog log;
  auto mirror = PrefixMirror::Start(&breakable, "/p/", log.Callback(), FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  ASSERT_TRUE(WaitUntil([&] { return breakable.watches_started() == 1; }));

  // Compaction ends the watch; the re-list finds the same contents: no on_change.
  breakable.EndWatches(FailedPreconditionError("required revision has been compacted"));
  ASSERT_TRUE(WaitUntil([&] { return breakable.watches_started() == 2; }));
  EXPECT_EQ(mirror->resyncs(), 1u);
  EXPECT_EQ(log.count(), 1u);

  // A change the broken stream never delivered is found by the re-list.
  breakable.Cut();
  ASSERT_TRUE(store.Put("/p/b", "2").ok());
  store.WaitForWatchersIdle();
  EXPECT_EQ(mirror->snapshot(), (Snapshot{{"/p/a", "1"}}));
  breakable.EndWatches(UnavailableError("stream broke"));
  ASSERT_TRUE(log.WaitForLast({{"/p/a", "1"}, {"/p/b", "2"}}));
  EXPECT_EQ(log.count(), 2u);
  EXPECT_EQ(mirror->resyncs(), 2u);

  // And the new watch follows changes again.
  ASSERT_TRUE(WaitUntil([&] { return breakable.watches_started() == 3; }));
  ASSERT_TRUE(store.Delete("/p/a").ok());
  ASSERT_TRUE(log.WaitForLast({{"/p/b", "2"}}));
}

TEST(PrefixMirrorTest, OnChangeMayReadTheMirror) {
  MemoryCoordination store;
  std::atomic<PrefixMirror*> self{nullptr};
  std::atomic<int> consistent{0};
  auto mirror = PrefixMirror::Start(
      &store, "/p/",
      [&](const Snapshot& s) {
        PrefixMirror* m = self.load();
        if (m != nullptr && m->snapshot() == s && m->connected()) ++consistent;
      },
      FastOptions());
  self = mirror.get();
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ASSERT_TRUE(WaitUntil([&] { return consistent.load() >= 1; }));
}

TEST(PrefixMirrorTest, NoCallbackAfterDestruction) {
  MemoryCoordination store;
  std::atomic<int> calls{0};
  auto mirror = PrefixMirror::Start(
      &store, "/p/", [&](const Snapshot&) { ++calls; }, FastOptions());
  ASSERT_TRUE(mirror->WaitForSync(seconds(5)));
  ASSERT_TRUE(store.Put("/p/a", "1").ok());
  ASSERT_TRUE(WaitUntil([&] { return calls.load() == 2; }));
  mirror.reset();
  ASSERT_TRUE(store.Put("/p/b", "2").ok());
  store.WaitForWatchersIdle();
  EXPECT_EQ(calls.load(), 2);
}

TEST(PrefixMirrorTest, MirrorsWorkerRegistrationsAndLeaseExpiry) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  ChangeLog log;
  auto mirror =
      PrefixMirror::Start(&store, std::string(kWorkersPrefix), log.Callback(), FastOptions());
  WorkerRegistryOptions ro;
  ro.ttl = seconds(1);
  ro.retry_min = milliseconds(2);
  ro.retry_max = milliseconds(20);
  WorkerRecord r1;
  r1.id = "w1";
  r1.address = "h1:1";
  WorkerRecord r2;
  r2.id = "w2";
  r2.address = "h2:1";
  auto w1 = std::move(WorkerRegistry::Start(&store, r1, ro)).value();
  auto w2 = std::move(WorkerRegistry::Start(&store, r2, ro)).value();
  const Snapshot both{{WorkerKey("w1"), EncodeWorkerRecord(r1)},
                      {WorkerKey("w2"), EncodeWorkerRecord(r2)}};
  ASSERT_TRUE(log.WaitForLast(both));

  w1->Stop();  // Clean shutdown: gone at once.
  const Snapshot only_w2{{WorkerKey("w2"), EncodeWorkerRecord(r2)}};
  ASSERT_TRUE(log.WaitForLast(only_w2));

  // w2 stalls past its TTL: the mirror sees it vanish, then come back when it re-registers.
  const size_t before = log.count();
  clock.Advance(seconds(2));
  store.ExpireLeases();
  ASSERT_TRUE(WaitUntil([&] { return w2->registrations() == 2; }));
  ASSERT_TRUE(log.WaitForLast(only_w2));
  bool saw_empty = false;
  for (const Snapshot& s : log.calls()) saw_empty = saw_empty || s.empty();
  EXPECT_TRUE(saw_empty);
  EXPECT_GE(log.count(), before + 2);
  w2->Stop();
  ASSERT_TRUE(log.WaitForLast({}));
}

}  // namespace
}  // namespace cairn::membership
