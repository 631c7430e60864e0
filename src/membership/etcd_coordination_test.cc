// Integration tests of EtcdCoordination against a real etcd (label "integration"): the shared
// behavioural suite, plus outages, restarts and endpoint failover. Fails (never skips) when etcd is
// not installed.
#include "membership/etcd_coordination.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "membership/coordination_behaviour.h"
#include "membership/etcd_process.h"

namespace cairn::membership {
namespace {

using testing::BehaviourParam;
using testing::CoordinationBehaviour;
using testing::CoordinationEnv;
using testing::EtcdProcess;
using testing::WatchRecorder;

// One etcd for the behavioural suite (tests use disjoint key prefixes), killed at exit.
std::unique_ptr<EtcdProcess>& SharedEtcd() {
  static std::unique_ptr<EtcdProcess> etcd;
  return etcd;
}

class SharedEtcdCleanup : public ::testing::Environment {
 public:
  void TearDown() override { SharedEtcd().reset(); }
};
[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new SharedEtcdCleanup);

EtcdOptions FastOptions(const std::string& endpoints) {
  EtcdOptions o;
  o.endpoints = endpoints;
  o.connect_timeout_ms = 500;
  o.request_timeout_ms = 2000;
  return o;
}

// Starts the shared etcd on first use; nullptr (with a test failure recorded) if it cannot.
EtcdProcess* StartedEtcd() {
  if (SharedEtcd() == nullptr) {
    StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start();
    if (!etcd.ok()) {
      ADD_FAILURE() << etcd.status().ToString();
      return nullptr;
    }
    SharedEtcd() = std::move(etcd).value();
  }
  return SharedEtcd().get();
}

class EtcdEnv : public CoordinationEnv {
 public:
  static std::unique_ptr<CoordinationEnv> Make() {
    if (StartedEtcd() == nullptr) return nullptr;
    auto env = std::make_unique<EtcdEnv>();
    env->a_ = std::move(EtcdCoordination::Create(FastOptions(SharedEtcd()->endpoint()))).value();
    env->b_ = std::move(EtcdCoordination::Create(FastOptions(SharedEtcd()->endpoint()))).value();
    return env;
  }
  Coordination* client() override { return a_.get(); }
  Coordination* other_client() override { return b_.get(); }
  void LetTimePass(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }

 private:
  std::unique_ptr<EtcdCoordination> a_;
  std::unique_ptr<EtcdCoordination> b_;
};

INSTANTIATE_TEST_SUITE_P(Etcd, CoordinationBehaviour,
                         ::testing::Values(BehaviourParam{"etcd", &EtcdEnv::Make}),
                         [](const auto& info) { return info.param.name; });

TEST(EtcdCoordinationTest, RejectsBadEndpointLists) {
  EXPECT_EQ(EtcdCoordination::Create(FastOptions("")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdCoordination::Create(FastOptions("127.0.0.1:2379")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(EtcdCoordinationTest, RefusesTlsFilesWithPlaintextEndpointsAndMissingFiles) {
  EtcdOptions o = FastOptions("https://127.0.0.1:2379,http://127.0.0.1:2380");
  o.tls.ca_file = "/etc/hostname";  // Any readable file: the endpoint check comes first.
  auto mixed = EtcdCoordination::Create(o);
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("http://127.0.0.1:2380"), std::string::npos)
      << mixed.status().ToString();
  o = FastOptions("https://127.0.0.1:2379");
  o.tls.ca_file = "/nonexistent/ca.crt";
  EXPECT_NE(EtcdCoordination::Create(o).status().message().find("/nonexistent/ca.crt"),
            std::string::npos);
  o.tls.ca_file.clear();
  o.tls.cert_file = "/etc/hostname";
  EXPECT_EQ(EtcdCoordination::Create(o).status().code(), StatusCode::kInvalidArgument)
      << "a certificate without its key";
}

TEST(EtcdCoordinationTest, PlaintextBeyondLoopbackNeedsAStatedReason) {
  for (const char* local : {"http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379",
                            "https://10.0.0.5:2379"}) {
    EXPECT_TRUE(EtcdCoordination::Create(FastOptions(local)).ok()) << local;
  }
  for (const char* remote : {"http://10.0.0.5:2379", "http://etcd-1:2379", "http://[fd00::5]:2379",
                             "http://127.0.0.1:2379,http://10.0.0.6:2379"}) {
    auto refused = EtcdCoordination::Create(FastOptions(remote));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << remote;
    EXPECT_NE(refused.status().message().find("--etcd-insecure-plaintext"), std::string::npos)
        << refused.status().ToString();
    EtcdOptions o = FastOptions(remote);
    o.insecure_plaintext = "isolated test network";
    EXPECT_TRUE(EtcdCoordination::Create(o).ok()) << remote;
  }
}

TEST(EtcdCoordinationTest, KilledEtcdGivesUnavailableQuicklyAndRestartRecovers) {
  StatusOr<std::unique_ptr<EtcdProcess>> started = EtcdProcess::Start();
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<EtcdProcess> etcd = std::move(started).value();
  auto c = std::move(EtcdCoordination::Create(FastOptions(etcd->endpoint()))).value();
  StatusOr<int64_t> r1 = c->Put("/k", "before");
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  WatchRecorder rec;
  auto watch = c->Watch("/", 0, rec.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();

  etcd->Kill();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(c->Get("/k").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c->Put("/k", "x").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c->GrantLease(std::chrono::seconds(5)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(c->Watch("/", 0, rec.Callback()).status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));

  ASSERT_TRUE(etcd->Restart().ok()) << etcd->Log();
  StatusOr<KeyValue> kv = c->Get("/k");
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_EQ(kv->value, "before");
  // The watch reconnected on its own and resumes without a gap.
  StatusOr<int64_t> r2 = c->Put("/k", "after");
  ASSERT_TRUE(r2.ok());
  std::vector<WatchEvent> e = rec.WaitForEvents(1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].value, "after");
  EXPECT_EQ(e[0].mod_revision, *r2);
  EXPECT_TRUE(rec.errors().empty());
  watch->reset();
}

TEST(EtcdCoordinationTest, FailsOverPastAnEndpointThatRefusesConnections) {
  ASSERT_NE(StartedEtcd(), nullptr);
  // Port 1 on loopback refuses connections.
  auto c = std::move(EtcdCoordination::Create(
                         FastOptions("http://127.0.0.1:1," + SharedEtcd()->endpoint())))
               .value();
  StatusOr<int64_t> r = c->Put("/failover/k", "v");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(c->EndpointsInOrder().front(), SharedEtcd()->endpoint());
  WatchRecorder rec;
  auto watch = c->Watch("/failover/", *r, rec.Callback());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_EQ(rec.WaitForEvents(1).size(), 1u);
}

TEST(EtcdCoordinationTest, WatchOfACompactedRevisionFails) {
  ASSERT_NE(StartedEtcd(), nullptr);
  auto c = std::move(EtcdCoordination::Create(FastOptions(SharedEtcd()->endpoint()))).value();
  StatusOr<int64_t> r1 = c->Put("/compact/k", "1");
  StatusOr<int64_t> r2 = c->Put("/compact/k", "2");
  ASSERT_TRUE(r1.ok() && r2.ok());
  // Compaction is not part of Coordination; ask etcd directly with its CLI.
  const std::string cmd = "ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" + SharedEtcd()->endpoint() +
                          " compact " + std::to_string(*r2) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(c->Watch("/compact/", *r1, [](const WatchUpdate&) {}).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cairn::membership
