// Integration tests of the cluster-state pieces (WorkerRegistry, PrefixMirror, MountStore)
// against a real etcd (label "integration"): each test runs its own etcd, because the pieces use
// the fixed v1 keys. Fails (never skips) when etcd is not installed.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>

#include "membership/etcd_coordination.h"
#include "membership/etcd_process.h"
#include "membership/mount_store.h"
#include "membership/prefix_mirror.h"
#include "membership/records.h"
#include "membership/worker_registry.h"

namespace cairn::membership {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::EtcdProcess;

bool WaitUntil(const std::function<bool()>& pred, milliseconds timeout = seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

WorkerRecord Worker(std::string id) {
  WorkerRecord r;
  r.id = std::move(id);
  r.address = "10.0.0.1:7070";
  return r;
}

MountSpec MountAt(std::string path, std::string uri) {
  MountSpec m;
  m.path = std::move(path);
  m.uri = std::move(uri);
  return m;
}

class ClusterStateEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status().ToString();
    etcd_ = std::move(etcd).value();
    client_ = NewClient();
    other_ = NewClient();
  }

  std::unique_ptr<EtcdCoordination> NewClient() {
    EtcdOptions o;
    o.endpoints = etcd_->endpoint();
    o.connect_timeout_ms = 500;
    o.request_timeout_ms = 2000;
    return std::move(EtcdCoordination::Create(o)).value();
  }

  static WorkerRegistryOptions RegistryOptions() {
    WorkerRegistryOptions o;
    o.ttl = seconds(2);
    o.retry_min = milliseconds(20);
    o.retry_max = milliseconds(200);
    return o;
  }

  std::unique_ptr<EtcdProcess> etcd_;  // Declared first: outlives the clients.
  std::unique_ptr<EtcdCoordination> client_;
  std::unique_ptr<EtcdCoordination> other_;
};

TEST_F(ClusterStateEtcdTest, RegistryRegistersAndStopDeletesTheKeyAtOnce) {
  WorkerRecord rec = Worker("w1");
  rec.metrics_address = "10.0.0.1:9090";
  rec.capacity_bytes = 1 << 30;
  rec.start_time_unix_ms = 1234;
  auto reg = std::move(WorkerRegistry::Start(client_.get(), rec, RegistryOptions())).value();
  ASSERT_TRUE(reg->WaitRegistered(seconds(10)));
  StatusOr<KeyValue> kv = other_->Get(WorkerKey("w1"));
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_NE(kv->lease_id, 0);
  EXPECT_EQ(*DecodeWorkerRecord(kv->value), rec);
  reg->Stop();
  EXPECT_EQ(other_->Get(WorkerKey("w1")).status().code(), StatusCode::kNotFound);
}

TEST_F(ClusterStateEtcdTest, RegistryReRegistersWhenItsLeaseIsRevoked) {
  auto reg =
      std::move(WorkerRegistry::Start(client_.get(), Worker("w1"), RegistryOptions())).value();
  ASSERT_TRUE(reg->WaitRegistered(seconds(10)));
  const int64_t lease = other_->Get(WorkerKey("w1"))->lease_id;
  ASSERT_TRUE(other_->RevokeLease(lease).ok());
  ASSERT_TRUE(WaitUntil([&] { return reg->registrations() == 2; }));
  StatusOr<KeyValue> kv = other_->Get(WorkerKey("w1"));
  ASSERT_TRUE(kv.ok());
  EXPECT_NE(kv->lease_id, lease);
}

TEST_F(ClusterStateEtcdTest, RegistryStartsWhileEtcdIsDownAndStopNeverHangs) {
  etcd_->Kill();
  auto reg =
      std::move(WorkerRegistry::Start(client_.get(), Worker("w1"), RegistryOptions())).value();
  EXPECT_FALSE(reg->WaitRegistered(milliseconds(300)));
  ASSERT_TRUE(etcd_->Restart().ok()) << etcd_->Log();
  ASSERT_TRUE(reg->WaitRegistered(seconds(10)));
  EXPECT_TRUE(other_->Get(WorkerKey("w1")).ok());

  etcd_->Kill();
  const auto t0 = std::chrono::steady_clock::now();
  reg->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(4));
}

TEST_F(ClusterStateEtcdTest, MirrorKeepsItsCopyAcrossAnEtcdRestart) {
  ASSERT_TRUE(client_->Put("/m/a", "1").ok());
  MirrorOptions o;
  o.retry_min = milliseconds(20);
  o.retry_max = milliseconds(200);
  o.probe_interval = milliseconds(100);
  std::atomic<int> changes{0};
  auto mirror = PrefixMirror::Start(
      client_.get(), "/m/", [&](const PrefixMirror::Snapshot&) { ++changes; }, o);
  ASSERT_TRUE(mirror->WaitForSync(seconds(10)));
  ASSERT_TRUE(other_->Put("/m/b", "2").ok());
  ASSERT_TRUE(WaitUntil([&] { return mirror->snapshot().size() == 2; }));

  etcd_->Kill();
  ASSERT_TRUE(WaitUntil([&] { return !mirror->connected(); }));
  EXPECT_EQ(mirror->snapshot().size(), 2u);
  ASSERT_TRUE(etcd_->Restart().ok()) << etcd_->Log();
  ASSERT_TRUE(WaitUntil([&] { return mirror->connected(); }));
  ASSERT_TRUE(other_->Delete("/m/a").ok());
  ASSERT_TRUE(WaitUntil([&] {
    return mirror->snapshot() == PrefixMirror::Snapshot{{"/m/b", "2"}};
  }));
  EXPECT_EQ(changes.load(), 3);
}

TEST_F(ClusterStateEtcdTest, MirrorSeesWorkersComeAndGo) {
  auto mirror = PrefixMirror::Start(client_.get(), std::string(kWorkersPrefix), nullptr);
  ASSERT_TRUE(mirror->WaitForSync(seconds(10)));
  auto reg =
      std::move(WorkerRegistry::Start(other_.get(), Worker("w9"), RegistryOptions())).value();
  ASSERT_TRUE(WaitUntil([&] { return mirror->snapshot().count(WorkerKey("w9")) == 1; }));
  reg.reset();
  ASSERT_TRUE(WaitUntil([&] { return mirror->snapshot().empty(); }));
}

TEST_F(ClusterStateEtcdTest, ConcurrentMountEditsAllLand) {
  std::string root = ::testing::TempDir() + "cluster_mounts_XXXXXX";
  ASSERT_NE(::mkdtemp(root.data()), nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5;
  std::vector<std::unique_ptr<EtcdCoordination>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(NewClient());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MountStore store(clients[t].get());
      for (int i = 0; i < kPerThread; ++i) {
        MountSpec m =
            MountAt("/t" + std::to_string(t) + "/m" + std::to_string(i), "file://" + root);
        Status st = store.Add(m);
        if (!st.ok()) {
          ++failures;
          ADD_FAILURE() << st.ToString();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  MountStore store(client_.get());
  StatusOr<std::vector<MountSpec>> list = store.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_EQ(store.Add(MountAt("/t0/m0", "file://" + root)).code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(store.Remove("/t0/m0").ok());
  EXPECT_EQ(store.List()->size(), static_cast<size_t>(kThreads * kPerThread - 1));
  etcd_->Kill();
  EXPECT_EQ(store.Add(MountAt("/x", "file://" + root)).code(), StatusCode::kUnavailable);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace cairn::membership
