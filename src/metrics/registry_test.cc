#include "metrics/registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cairn::metrics {
namespace {

TEST(RegistryTest, EmptyRegistryExposesNothing) {
  Registry registry;
  EXPECT_EQ(registry.ExposeText(), "");
  EXPECT_TRUE(registry.registration_status().ok());
}

TEST(RegistryTest, ExposesCountersAndGaugesExactly) {
  Registry registry;
  Counter* reads = registry.AddCounter("cairn_reads_total", "Page reads served.");
  Gauge* open = registry.AddGauge("cairn_open_files", "Open page files.");
  reads->Increment(3);
  open->Set(2.5);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP cairn_reads_total Page reads served.\n"
            "# TYPE cairn_reads_total counter\n"
            "cairn_reads_total 3\n"
            "# HELP cairn_open_files Open page files.\n"
            "# TYPE cairn_open_files gauge\n"
            "cairn_open_files 2.5\n");
}

TEST(RegistryTest, GroupsSeriesOfAFamilyUnderOneHeader) {
  Registry registry;
  // Interleaved registration of two families must still print each family contiguously.
  registry.AddCounter("req_total", "Requests.", {{"op", "read"}})->Increment(1);
  registry.AddGauge("queue", "Queue depth.")->Set(4);
  registry.AddCounter("req_total", "Requests.", {{"op", "write"}})->Increment(2);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP req_total Requests.\n"
            "# TYPE req_total counter\n"
            "req_total{op=\"read\"} 1\n"
            "req_total{op=\"write\"} 2\n"
            "# HELP queue Queue depth.\n"
            "# TYPE queue gauge\n"
            "queue 4\n");
}

TEST(RegistryTest, ExposesHistogramsExactly) {
  Registry registry;
  Histogram* latency =
      registry.AddHistogram("read_seconds", "Read latency.", {0.001, 0.25, 1}, {{"tier", "nvme"}});
  // Binary fractions, so the golden sum is exact.
  latency->Observe(0.0009765625);
  latency->Observe(0.125);
  latency->Observe(0.25);
  latency->Observe(3);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP read_seconds Read latency.\n"
            "# TYPE read_seconds histogram\n"
            "read_seconds_bucket{tier=\"nvme\",le=\"0.001\"} 1\n"
            "read_seconds_bucket{tier=\"nvme\",le=\"0.25\"} 3\n"
            "read_seconds_bucket{tier=\"nvme\",le=\"1\"} 3\n"
            "read_seconds_bucket{tier=\"nvme\",le=\"+Inf\"} 4\n"
            "read_seconds_sum{tier=\"nvme\"} 3.3759765625\n"
            "read_seconds_count{tier=\"nvme\"} 4\n");
}

TEST(RegistryTest, UnlabelledHistogramAndDefaultBuckets) {
  Registry registry;
  Histogram* h = registry.AddHistogram("op_seconds", "", LatencyBucketsSeconds());
  h->Observe(0.00002);
  const std::string text = registry.ExposeText();
  // No HELP line for an empty help; first buckets show the 1e-05 formatting.
  EXPECT_EQ(text.substr(0, text.find("op_seconds_bucket{le=\"5e-05\"}")),
            "# TYPE op_seconds histogram\n"
            "op_seconds_bucket{le=\"1e-05\"} 0\n"
            "op_seconds_bucket{le=\"2.5e-05\"} 1\n");
  EXPECT_NE(text.find("op_seconds_bucket{le=\"10\"} 1\nop_seconds_bucket{le=\"+Inf\"} 1\n"
                      "op_seconds_sum 2e-05\nop_seconds_count 1\n"),
            std::string::npos);
}

TEST(RegistryTest, EscapesHelpAndLabelValuesAndSortsLabels) {
  Registry registry;
  registry
      .AddGauge("g", "Line one\nback\\slash \"quoted\"", {{"path", "C:\\dir\n\"x\""}, {"a", "1"}})
      ->Set(1);
  EXPECT_EQ(registry.ExposeText(),
            "# HELP g Line one\\nback\\\\slash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{a=\"1\",path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST(RegistryTest, SameSeriesReturnsSameMetricWhateverTheLabelOrder) {
  Registry registry;
  Counter* a = registry.AddCounter("c_total", "C.", {{"x", "1"}, {"y", "2"}});
  Counter* b = registry.AddCounter("c_total", "C.", {{"y", "2"}, {"x", "1"}});
  EXPECT_EQ(a, b);
  Histogram* h1 = registry.AddHistogram("h", "H.", {1, 2});
  Histogram* h2 = registry.AddHistogram("h", "H.", {1, 2, INFINITY});  // Trailing +Inf dropped.
  EXPECT_EQ(h1, h2);
  EXPECT_TRUE(registry.registration_status().ok());
}

TEST(RegistryTest, ConflictingRegistrationsAreReportedAndNotExported) {
  Registry registry;
  registry.AddCounter("x_total", "X.")->Increment();
  const std::string before = registry.ExposeText();

  Gauge* wrong_type = registry.AddGauge("x_total", "X.");
  ASSERT_NE(wrong_type, nullptr);
  wrong_type->Set(7);  // Usable, just not exported.
  EXPECT_EQ(registry.registration_status().code(), StatusCode::kInvalidArgument);

  registry.AddCounter("x_total", "Different help.")->Increment();
  registry.AddCounter("bad-name", "B.")->Increment();
  registry.AddCounter("y_total", "Y.", {{"__reserved", "v"}})->Increment();
  registry.AddCounter("y_total", "Y.", {{"a", "1"}, {"a", "2"}})->Increment();
  registry.AddHistogram("h", "H.", {2, 1})->Observe(1);
  registry.AddHistogram("h2", "H.", {1, NAN})->Observe(1);
  registry.AddHistogram("h3", "H.", {1}, {{"le", "x"}})->Observe(1);
  registry.AddHistogram("z", "Z.", {1});
  registry.AddHistogram("z", "Z.", {1, 2});  // Different buckets in one family.
  registry.AddGauge("z_count", "Clashes with histogram z.")->Set(1);
  registry.AddCallback("cb", "CB.", MetricType::kHistogram, [] { return 1.0; });
  registry.AddCallback("cb2", "CB.", MetricType::kGauge, nullptr);
  EXPECT_EQ(registry.ExposeText(), before +
                                       "# HELP z Z.\n# TYPE z histogram\n"
                                       "z_bucket{le=\"1\"} 0\nz_bucket{le=\"+Inf\"} 0\n"
                                       "z_sum 0\nz_count 0\n");
  // The first error is kept.
  EXPECT_NE(registry.registration_status().message().find("x_total"), std::string::npos);
}

TEST(RegistryTest, CallbackAndValueCannotShareASeries) {
  Registry registry;
  registry.AddGauge("g", "G.")->Set(1);
  registry.AddCallback("g", "G.", MetricType::kGauge, [] { return 2.0; });
  EXPECT_FALSE(registry.registration_status().ok());
  EXPECT_EQ(registry.ExposeText(), "# HELP g G.\n# TYPE g gauge\ng 1\n");
}

TEST(RegistryTest, CallbacksAreEvaluatedAtScrape) {
  Registry registry;
  double used = 10;
  registry.AddCallback("store_used_bytes", "Used bytes.", MetricType::kGauge,
                       [&used] { return used; }, {{"dir", "/nvme0"}});
  registry.AddGauge("store_used_bytes", "Used bytes.", {{"dir", "/nvme1"}})->Set(5);
  registry.AddCallback("evictions_total", "Evictions.", MetricType::kCounter, [] { return 9.0; });
  registry.AddCallback("legacy", "Untyped.", MetricType::kUntyped, [] { return -1.5; });
  used = 1e12;
  EXPECT_EQ(registry.ExposeText(),
            "# HELP store_used_bytes Used bytes.\n"
            "# TYPE store_used_bytes gauge\n"
            "store_used_bytes{dir=\"/nvme0\"} 1000000000000\n"
            "store_used_bytes{dir=\"/nvme1\"} 5\n"
            "# HELP evictions_total Evictions.\n"
            "# TYPE evictions_total counter\n"
            "evictions_total 9\n"
            "# HELP legacy Untyped.\n"
            "# TYPE legacy untyped\n"
            "legacy -1.5\n");
  EXPECT_TRUE(registry.registration_status().ok());
}

TEST(RegistryTest, AddingACallbackAgainReplacesIt) {
  Registry registry;
  registry.AddCallback("v", "V.", MetricType::kGauge, [] { return 1.0; });
  registry.AddCallback("v", "V.", MetricType::kGauge, [] { return 2.0; });
  EXPECT_EQ(registry.ExposeText(), "# HELP v V.\n# TYPE v gauge\nv 2\n");
}

TEST(RegistryTest, RemoveCallbackForgetsSeriesAndEmptyFamily) {
  Registry registry;
  registry.AddCallback("v", "V.", MetricType::kGauge, [] { return 1.0; }, {{"k", "a"}});
  registry.AddCallback("v", "V.", MetricType::kGauge, [] { return 2.0; }, {{"k", "b"}});
  EXPECT_FALSE(registry.RemoveCallback("v", {{"k", "zzz"}}));
  EXPECT_FALSE(registry.RemoveCallback("nope", {}));
  EXPECT_TRUE(registry.RemoveCallback("v", {{"k", "a"}}));
  EXPECT_EQ(registry.ExposeText(), "# HELP v V.\n# TYPE v gauge\nv{k=\"b\"} 2\n");
  EXPECT_TRUE(registry.RemoveCallback("v", {{"k", "b"}}));
  EXPECT_EQ(registry.ExposeText(), "");
  // The name is free again, even with another type.
  registry.AddCounter("v", "Now a counter.")->Increment();
  EXPECT_EQ(registry.ExposeText(), "# HELP v Now a counter.\n# TYPE v counter\nv 1\n");
  EXPECT_TRUE(registry.registration_status().ok());
}

TEST(RegistryTest, ThrowingCallbackIsLeftOutOfTheScrape) {
  Registry registry;
  registry.AddCallback("bad", "B.", MetricType::kGauge,
                       []() -> double { throw std::runtime_error("boom"); }, {{"k", "1"}});
  registry.AddCallback("bad", "B.", MetricType::kGauge, [] { return 3.0; }, {{"k", "2"}});
  EXPECT_EQ(registry.ExposeText(), "# HELP bad B.\n# TYPE bad gauge\nbad{k=\"2\"} 3\n");
}

TEST(RegistryTest, ConcurrentRegistrationUpdatesAndScrapes) {
  Registry registry;
  constexpr int kThreads = 4;
  constexpr int kIterations = 20'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      // Every thread registers the shared series itself: get-or-create must hand out one object.
      Counter* shared = registry.AddCounter("shared_total", "Shared.");
      Histogram* h = registry.AddHistogram("lat_seconds", "Latency.", LatencyBucketsSeconds(),
                                           {{"t", std::to_string(t)}});
      for (int i = 0; i < kIterations; ++i) {
        shared->Increment();
        h->Observe(0.001);
        if (i % 5000 == 0) (void)registry.ExposeText();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = registry.ExposeText();
  EXPECT_NE(text.find("shared_total " + std::to_string(kThreads * kIterations) + "\n"),
            std::string::npos)
      << text;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_NE(text.find("lat_seconds_count{t=\"" + std::to_string(t) + "\"} " +
                        std::to_string(kIterations) + "\n"),
              std::string::npos);
  }
  EXPECT_TRUE(registry.registration_status().ok());
}

}  // namespace
}  // namespace cairn::metrics
