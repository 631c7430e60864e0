#include "membership/worker_registry.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <functional>
#include <thread>

#include "common/clock.h"
#include "membership/memory_coordination.h"

namespace cairn::membership {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Polls `pred` every few milliseconds until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout = seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

WorkerRecord Record(std::string id = "w1", std::string address = "10.0.0.1:7070") {
  WorkerRecord r;
  r.id = std::move(id);
  r.address = std::move(address);
  r.capacity_bytes = 1 << 30;
  return r;
}

// Short TTL and fast retries so tests take milliseconds, not seconds.
WorkerRegistryOptions FastOptions() {
  WorkerRegistryOptions o;
  o.ttl = seconds(1);
  o.retry_min = milliseconds(2);
  o.retry_max = milliseconds(20);
  o.stop_timeout = milliseconds(200);
  return o;
}

std::unique_ptr<WorkerRegistry> MustStart(Coordination* c, WorkerRecord r,
                                          WorkerRegistryOptions o = FastOptions()) {
  StatusOr<std::unique_ptr<WorkerRegistry>> reg = WorkerRegistry::Start(c, std::move(r), o);
  EXPECT_TRUE(reg.ok()) << reg.status().ToString();
  return reg.ok() ? std::move(reg).value() : nullptr;
}

// Routes spdlog's default logger into a ring buffer while alive. Install it before starting
// background threads and destroy it after stopping them (swapping the logger is not atomic).
class LogCapture {
 public:
  LogCapture()
      : previous_(spdlog::default_logger()),
        sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink_));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  int Count(std::string_view needle) const {
    int n = 0;
    for (const std::string& line : sink_->last_formatted()) {
      if (line.find(needle) != std::string::npos) ++n;
    }
    return n;
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

TEST(WorkerRegistryTest, StartRejectsBadRecordsAndOptions) {
  MemoryCoordination store;
  EXPECT_EQ(WorkerRegistry::Start(nullptr, Record()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerRegistry::Start(&store, Record("bad/id")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerRegistry::Start(&store, Record("w1", "")).status().code(),
            StatusCode::kInvalidArgument);
  WorkerRegistryOptions o = FastOptions();
  o.ttl = seconds(0);
  EXPECT_EQ(WorkerRegistry::Start(&store, Record(), o).status().code(),
            StatusCode::kInvalidArgument);
  o = FastOptions();
  o.retry_max = milliseconds(1);
  EXPECT_EQ(WorkerRegistry::Start(&store, Record(), o).status().code(),
            StatusCode::kInvalidArgument);
  // Nothing was written by the refused starts.
  EXPECT_TRUE(store.GetPrefix(kWorkersPrefix)->entries.empty());
}

TEST(WorkerRegistryTest, RegistersTheRecordUnderALease) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  EXPECT_TRUE(reg->registered());
  EXPECT_EQ(reg->registrations(), 1u);
  StatusOr<KeyValue> kv = store.Get(WorkerKey("w1"));
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_NE(kv->lease_id, 0);
  StatusOr<WorkerRecord> rec = DecodeWorkerRecord(kv->value);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(*rec, Record());
}

TEST(WorkerRegistryTest, KeepAlivesHoldTheKeyPastTheTtl) {
  MemoryCoordination store;  // Real clock: the lease really expires without keep-alives.
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  std::this_thread::sleep_for(milliseconds(1600));  // 1.6 TTLs.
  EXPECT_TRUE(store.Get(WorkerKey("w1")).ok());
  EXPECT_TRUE(reg->registered());
  EXPECT_EQ(reg->registrations(), 1u);
  EXPECT_EQ(reg->keepalive_failures(), 0u);
}

TEST(WorkerRegistryTest, RevokedLeaseIsReplacedByANewRegistration) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  const int64_t first_lease = store.Get(WorkerKey("w1"))->lease_id;
  ASSERT_TRUE(store.RevokeLease(first_lease).ok());
  EXPECT_EQ(store.Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
  // The next keep-alive (within ttl/3) finds the lease gone and registers again.
  ASSERT_TRUE(WaitUntil([&] { return reg->registrations() == 2; }));
  StatusOr<KeyValue> kv = store.Get(WorkerKey("w1"));
  ASSERT_TRUE(kv.ok());
  EXPECT_NE(kv->lease_id, first_lease);
  EXPECT_GE(reg->keepalive_failures(), 1u);
  EXPECT_TRUE(reg->registered());
}

TEST(WorkerRegistryTest, StalledPastTheTtlTheKeyExpiresThenComesBack) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  clock.Advance(seconds(2));  // As if the worker had been paused for two TTLs.
  store.ExpireLeases();
  EXPECT_EQ(store.Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WaitUntil([&] { return reg->registrations() == 2; }));
  EXPECT_TRUE(store.Get(WorkerKey("w1")).ok());
}

TEST(WorkerRegistryTest, StoreDownAtStartIsNotAnErrorAndRegistersLater) {
  MemoryCoordination store;
  store.SetUnavailable(true);
  auto reg = MustStart(&store, Record());
  ASSERT_NE(reg, nullptr);
  EXPECT_FALSE(reg->WaitRegistered(milliseconds(50)));
  EXPECT_FALSE(reg->registered());
  store.SetUnavailable(false);
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  EXPECT_TRUE(store.Get(WorkerKey("w1")).ok());
}

TEST(WorkerRegistryTest, AnOutageIsLoggedOnceNotPerAttempt) {
  MemoryCoordination store;
  LogCapture log;
  store.SetUnavailable(true);
  {
    auto reg = MustStart(&store, Record());
    // With 2..20 ms backoff, 150 ms of outage is many failed attempts.
    std::this_thread::sleep_for(milliseconds(150));
    store.SetUnavailable(false);
    ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
    reg->Stop();
  }
  EXPECT_EQ(log.Count("registration failed"), 1);
  EXPECT_EQ(log.Count("etcd answers again"), 1);
}

TEST(WorkerRegistryTest, StopRevokesTheLeaseAndIsIdempotent) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  reg->Stop();
  EXPECT_EQ(store.Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(reg->registered());
  EXPECT_FALSE(reg->WaitRegistered(milliseconds(1)));
  reg->Stop();
  reg.reset();  // The destructor's Stop() is a no-op too.
}

TEST(WorkerRegistryTest, DestructorDeregisters) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  {
    auto reg = MustStart(&store, Record());
    ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  }
  EXPECT_EQ(store.Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
}

TEST(WorkerRegistryTest, StopDuringAnOutageGivesUpAfterTheStopTimeout) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto reg = MustStart(&store, Record());
  ASSERT_TRUE(reg->WaitRegistered(seconds(5)));
  store.SetUnavailable(true);
  const auto t0 = std::chrono::steady_clock::now();
  reg->Stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, milliseconds(1000));
  store.SetUnavailable(false);
  // Not revoked: the key stays until its lease expires.
  EXPECT_TRUE(store.Get(WorkerKey("w1")).ok());
  clock.Advance(seconds(2));
  store.ExpireLeases();
  EXPECT_EQ(store.Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
}

TEST(WorkerRegistryTest, StopWhileNeverRegisteredReturnsPromptly) {
  MemoryCoordination store;
  store.SetUnavailable(true);
  auto reg = MustStart(&store, Record());
  const auto t0 = std::chrono::steady_clock::now();
  reg->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(500));
}

TEST(WorkerRegistryTest, SameIdTwiceTheNewestWinsAndTheOldStopLeavesIt) {
  FakeClock clock;
  MemoryCoordination store(&clock);
  auto stale = MustStart(&store, Record("w1", "old:1"));
  ASSERT_TRUE(stale->WaitRegistered(seconds(5)));
  auto fresh = MustStart(&store, Record("w1", "new:1"));
  ASSERT_TRUE(fresh->WaitRegistered(seconds(5)));
  EXPECT_EQ(DecodeWorkerRecord(store.Get(WorkerKey("w1"))->value)->address, "new:1");
  // The key moved to the fresh lease, so revoking the stale one does not delete it.
  stale->Stop();
  StatusOr<KeyValue> kv = store.Get(WorkerKey("w1"));
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(DecodeWorkerRecord(kv->value)->address, "new:1");
}

}  // namespace
}  // namespace cairn::membership
