// ClusterFeed over the in-memory coordination fake: mounts and workers published in "etcd"
// reach a running client without a restart; bad records are ignored; an outage keeps the last
// known state.
#include "client/cluster_feed.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "client/client_impl.h"
#include "membership/memory_coordination.h"
#include "membership/records.h"

namespace cairn::client {
namespace {

bool WaitFor(const std::function<bool()>& done, int timeout_ms = 5000) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

class ClusterFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cairn-feed-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "lake" / "sub");
    std::ofstream(dir_ / "lake" / "sub" / "a.txt") << "hello cluster";
    ClientOptions co;
    co.page_size = 128 * 1024;
    co.worker_timeout = std::chrono::milliseconds(500);
    auto mounts = mount::MountTable::Create({});
    ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
    auto fetcher = MakePageFetcher(co);
    ASSERT_TRUE(fetcher.ok());
    client_ = std::make_unique<ClientImpl>(co, *mounts, std::move(fetcher).value(), Clock::Real());
    auto feed = ClusterFeed::StartWith(&coord_, client_.get(), std::chrono::seconds(5));
    ASSERT_TRUE(feed.ok()) << feed.status().ToString();
    client_->AttachFeed(std::move(feed).value());
  }
  void TearDown() override {
    client_.reset();
    std::filesystem::remove_all(dir_);
  }

  MountSpec LakeSpec(const std::string& path) {
    MountSpec spec;
    spec.path = path;
    spec.uri = "file://" + (dir_ / "lake").string();
    spec.metadata_ttl = std::chrono::milliseconds(0);
    return spec;
  }

  std::string ReadAll(const std::string& path) {
    auto reader = client_->Open(path);
    if (!reader.ok()) return "<" + reader.status().ToString() + ">";
    std::string out(1024, '\0');
    auto n = (*reader)->Read(0, out);
    if (!n.ok()) return "<" + n.status().ToString() + ">";
    out.resize(*n);
    return out;
  }

  static inline int counter_ = 0;
  std::filesystem::path dir_;
  membership::MemoryCoordination coord_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_F(ClusterFeedTest, EmptyClusterHasAnEmptyRoot) {
  auto root = client_->ListDir("/", "", 100);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE(root->entries.empty());
  EXPECT_EQ(client_->Stats().workers, 0u);
  EXPECT_EQ(client_->Stat("/nope").status().code(), StatusCode::kNotFound);
}

TEST_F(ClusterFeedTest, MountAddedInEtcdBecomesReadableAndRemovedDisappears) {
  ASSERT_TRUE(
      coord_.Put(membership::kMountTableKey, membership::EncodeMountTable({LakeSpec("/data/lake")}))
          .ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stat("/data/lake/sub/a.txt").ok(); }));
  EXPECT_EQ(ReadAll("/data/lake/sub/a.txt"), "hello cluster");
  auto root = client_->ListDir("/", "", 100);
  ASSERT_TRUE(root.ok());
  ASSERT_EQ(root->entries.size(), 1u);
  EXPECT_EQ(root->entries[0].name, "data");

  ASSERT_TRUE(coord_.Put(membership::kMountTableKey, membership::EncodeMountTable({})).ok());
  ASSERT_TRUE(WaitFor([&] {
    return client_->Stat("/data/lake/sub/a.txt").status().code() == StatusCode::kNotFound;
  }));
}

TEST_F(ClusterFeedTest, OpenFileSurvivesItsMountBeingRemoved) {
  ASSERT_TRUE(
      coord_.Put(membership::kMountTableKey, membership::EncodeMountTable({LakeSpec("/lake")}))
          .ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stat("/lake/sub/a.txt").ok(); }));
  auto reader = client_->Open("/lake/sub/a.txt");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(coord_.Delete(membership::kMountTableKey).ok());
  ASSERT_TRUE(WaitFor([&] { return !client_->Stat("/lake/sub/a.txt").ok(); }));
  std::string out(64, '\0');
  auto n = (*reader)->Read(0, out);  // The reader keeps the table it was opened under.
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(out.substr(0, *n), "hello cluster");
}

TEST_F(ClusterFeedTest, WorkersJoinAndLeaveTheRing) {
  membership::WorkerRecord w1{"w1", "127.0.0.1:1", "", 1 << 30, 1};
  membership::WorkerRecord w2{"w2", "127.0.0.1:2", "", 1 << 30, 1};
  ASSERT_TRUE(coord_.Put(membership::WorkerKey("w1"), membership::EncodeWorkerRecord(w1)).ok());
  ASSERT_TRUE(coord_.Put(membership::WorkerKey("w2"), membership::EncodeWorkerRecord(w2)).ok());
  ASSERT_TRUE(coord_.Put(membership::WorkerKey("bad"), "{not json").ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stats().workers == 2; }));
  ASSERT_TRUE(coord_.Delete(membership::WorkerKey("w1")).ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stats().workers == 1; }));

  // Unreachable workers cost nothing but a fallback: reads still return the bytes.
  ASSERT_TRUE(
      coord_.Put(membership::kMountTableKey, membership::EncodeMountTable({LakeSpec("/lake")}))
          .ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stat("/lake/sub/a.txt").ok(); }));
  EXPECT_EQ(ReadAll("/lake/sub/a.txt"), "hello cluster");
}

TEST_F(ClusterFeedTest, OutageKeepsTheLastKnownStateAndCatchesUpAfter) {
  membership::WorkerRecord w1{"w1", "127.0.0.1:1", "", 1 << 30, 1};
  ASSERT_TRUE(coord_.Put(membership::WorkerKey("w1"), membership::EncodeWorkerRecord(w1)).ok());
  ASSERT_TRUE(
      coord_.Put(membership::kMountTableKey, membership::EncodeMountTable({LakeSpec("/lake")}))
          .ok());
  ASSERT_TRUE(WaitFor(
      [&] { return client_->Stats().workers == 1 && client_->Stat("/lake/sub/a.txt").ok(); }));
  coord_.SetUnavailable(true);
  ASSERT_TRUE(WaitFor([&] { return !client_->Stats().etcd_connected; }, 10000));
  EXPECT_EQ(client_->Stats().workers, 1u);
  EXPECT_EQ(ReadAll("/lake/sub/a.txt"), "hello cluster");
  coord_.SetUnavailable(false);
  membership::WorkerRecord w2{"w2", "127.0.0.1:2", "", 1 << 30, 1};
  ASSERT_TRUE(coord_.Put(membership::WorkerKey("w2"), membership::EncodeWorkerRecord(w2)).ok());
  ASSERT_TRUE(WaitFor([&] { return client_->Stats().workers == 2; }, 10000));
  ASSERT_TRUE(WaitFor([&] { return client_->Stats().etcd_connected; }, 10000));
}

}  // namespace
}  // namespace cairn::client
