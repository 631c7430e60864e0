#include "ufs/fault_injecting_ufs.h"

#include <gtest/gtest.h>

#include "ufs/counting_ufs.h"
#include "ufs/memory_ufs.h"

namespace cairn::ufs {
namespace {

std::vector<bool> FailurePattern(uint64_t seed, double p, int calls) {
  auto memory = std::make_shared<MemoryUnderStorage>();
  memory->Put("k", "v");
  FakeClock clock;
  FaultInjectingUnderStorage ufs(memory, seed, &clock);
  ufs.SetFault(UfsOp::kStat, FaultSpec{.failure_probability = p});
  std::vector<bool> pattern;
  for (int i = 0; i < calls; ++i) pattern.push_back(!ufs.Stat("k").ok());
  return pattern;
}

TEST(FaultInjectingUfsTest, SameSeedSameFailures) {
  auto a = FailurePattern(42, 0.3, 300);
  EXPECT_EQ(a, FailurePattern(42, 0.3, 300));
  EXPECT_NE(a, FailurePattern(43, 0.3, 300));
  long failures = std::count(a.begin(), a.end(), true);
  EXPECT_GT(failures, 50);
  EXPECT_LT(failures, 130);
}

TEST(FaultInjectingUfsTest, FailNextThenCountsAndClears) {
  auto memory = std::make_shared<MemoryUnderStorage>();
  memory->Put("k", "v");
  FakeClock clock;
  FaultInjectingUnderStorage ufs(memory, 1, &clock);
  ufs.FailNext(UfsOp::kRead, 2, PermissionDeniedError("nope"));
  std::string buf(1, '\0');
  std::span<char> out(buf.data(), buf.size());
  EXPECT_EQ(ufs.Read("k", "", 0, out).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ufs.Read("k", "", 0, out).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(ufs.Read("k", "", 0, out).ok());
  EXPECT_EQ(ufs.calls(UfsOp::kRead), 3u);
  EXPECT_EQ(ufs.injected_failures(UfsOp::kRead), 2u);
  EXPECT_EQ(ufs.calls(UfsOp::kStat), 0u);
  EXPECT_EQ(ufs.total_calls(), 3u);

  ufs.SetFaultAll(FaultSpec{.failure_probability = 1.0, .status = IoError("disk")});
  EXPECT_EQ(ufs.Write("x", std::span<const char>("y", 1)).code(), StatusCode::kIoError);
  EXPECT_EQ(ufs.Delete("k").code(), StatusCode::kIoError);
  EXPECT_EQ(ufs.List(ListOptions()).status().code(), StatusCode::kIoError);
  ufs.ClearFaults();
  EXPECT_TRUE(ufs.Stat("k").ok());
  ufs.ResetCounters();
  EXPECT_EQ(ufs.total_calls(), 0u);
}

TEST(FaultInjectingUfsTest, AddsLatencyThroughTheClock) {
  auto memory = std::make_shared<MemoryUnderStorage>();
  memory->Put("k", "v");
  FakeClock clock;
  FaultInjectingUnderStorage ufs(memory, 1, &clock);
  ufs.SetFault(UfsOp::kStat, FaultSpec{.latency_us = 5000});
  int64_t start = clock.NowMicros();
  EXPECT_TRUE(ufs.Stat("k").ok());
  EXPECT_TRUE(ufs.Stat("k").ok());
  EXPECT_EQ(clock.NowMicros() - start, 10000);
}

TEST(CountingUfsTest, CountsRequestsBytesAndErrors) {
  auto memory = std::make_shared<MemoryUnderStorage>();
  memory->Put("k", "0123456789");
  CountingUnderStorage ufs(memory);
  std::string buf(4, '\0');
  ASSERT_TRUE(ufs.Read("k", "", 8, std::span<char>(buf.data(), buf.size())).ok());
  ASSERT_TRUE(ufs.Write("w", std::span<const char>("abc", 3)).ok());
  EXPECT_FALSE(ufs.Stat("missing").ok());
  ASSERT_TRUE(ufs.List(ListOptions()).ok());
  ASSERT_TRUE(ufs.Delete("w").ok());
  UfsCounts c = ufs.counts();
  EXPECT_EQ(c.reads, 1u);
  EXPECT_EQ(c.bytes_read, 2u);
  EXPECT_EQ(c.writes, 1u);
  EXPECT_EQ(c.bytes_written, 3u);
  EXPECT_EQ(c.stats, 1u);
  EXPECT_EQ(c.lists, 1u);
  EXPECT_EQ(c.deletes, 1u);
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.requests(), 5u);
  ufs.Reset();
  EXPECT_EQ(ufs.counts().requests(), 0u);
}

}  // namespace
}  // namespace cairn::ufs
