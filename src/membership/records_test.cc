#include "membership/records.h"

#include <gtest/gtest.h>

namespace cairn::membership {
namespace {

WorkerRecord SampleWorker() {
  WorkerRecord r;
  r.id = "w-1.rack:a_b";
  r.address = "10.0.0.5:7070";
  r.metrics_address = "10.0.0.5:9090";
  r.capacity_bytes = 2'000'000'000'000ULL;
  r.start_time_unix_ms = 1'718'000'000'000LL;
  r.metrics_tls = true;
  return r;
}

TEST(WorkerIdTest, AcceptsTheDocumentedAlphabetUpTo128Characters) {
  EXPECT_TRUE(ValidateWorkerId("w1").ok());
  EXPECT_TRUE(ValidateWorkerId("host-1.example.com:7070_a").ok());
  EXPECT_TRUE(ValidateWorkerId(std::string(128, 'a')).ok());
  EXPECT_EQ(ValidateWorkerId("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateWorkerId(std::string(129, 'a')).code(), StatusCode::kInvalidArgument);
  for (const std::string& bad :
       std::vector<std::string>{"a/b", "a b", "a\nb", std::string("a\0b", 3), "\xc3\xa9"}) {
    EXPECT_EQ(ValidateWorkerId(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(WorkerRecordTest, KeyIsThePrefixPlusTheId) {
  EXPECT_EQ(WorkerKey("w1"), "/cairn/v1/workers/w1");
}

TEST(WorkerRecordTest, RoundTripsEveryField) {
  const WorkerRecord r = SampleWorker();
  StatusOr<WorkerRecord> back = DecodeWorkerRecord(EncodeWorkerRecord(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(WorkerRecordTest, DecodeIgnoresUnknownFieldsAndDefaultsOptionalOnes) {
  StatusOr<WorkerRecord> r =
      DecodeWorkerRecord(R"({"id":"w2","address":"h:1","zone":"eu","extra":{"x":[1]}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->id, "w2");
  EXPECT_EQ(r->address, "h:1");
  EXPECT_EQ(r->metrics_address, "");
  EXPECT_EQ(r->capacity_bytes, 0u);
  EXPECT_EQ(r->start_time_unix_ms, 0);
  EXPECT_FALSE(r->metrics_tls);
}

TEST(WorkerRecordTest, DecodeRejectsMalformedRecords) {
  const char* bad[] = {
      "",
      "not json",
      "[1,2]",
      R"({"address":"h:1"})",                                 // No id.
      R"({"id":"w1"})",                                       // No address.
      R"({"id":"bad id","address":"h:1"})",                   // Invalid id.
      R"({"id":7,"address":"h:1"})",                          // Wrong type.
      R"({"id":"w1","address":"h:1","capacity_bytes":-1})",   // Negative capacity.
      R"({"id":"w1","address":"h:1","capacity_bytes":1.5})",  // Not an integer.
      R"({"id":"w1","address":"h:1","start_time_unix_ms":"1"})",
      R"({"id":"w1","address":"h:1","start_time_unix_ms":18446744073709551615})",
      "{\"id\":\"w1\",\"address\":\"\xff\"}",  // Invalid UTF-8.
      // Addresses a client would dial or the CLI would fetch: host:port only.
      R"({"id":"w1","address":"http://evil.example/x:80"})",
      R"({"id":"w1","address":"user@host:80"})",
      R"({"id":"w1","address":"a b:80"})",
      R"({"id":"w1","address":"host"})",
      R"({"id":"w1","address":"host:0"})",
      R"({"id":"w1","address":"host:65536"})",
      R"({"id":"w1","address":"host:80x"})",
      R"({"id":"w1","address":"h:1","metrics_address":"169.254.169.254/latest:80"})",
      R"({"id":"w1","address":"h:1","metrics_address":"h\nforged:80"})",
      R"({"id":"w1","address":"h:1","metrics_tls":"yes"})",
  };
  for (const char* text : bad) {
    EXPECT_EQ(DecodeWorkerRecord(text).status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(WorkerRecordTest, AddressErrorsDoNotEchoControlCharacters) {
  auto r = DecodeWorkerRecord(R"({"id":"w1","address":"h\nforged\u001b[0m:80"})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos) << r.status().message();
}

TEST(WorkerRecordTest, AddressesAreHostAndPort) {
  for (const char* good : {"10.0.0.7:7070", "cache-1.dc1:7070", "[::1]:7070", "[fe80::1]:1",
                           "host_name:65535", "h:1"}) {
    WorkerRecord r = SampleWorker();
    r.address = good;
    r.metrics_address = good;
    EXPECT_TRUE(ValidateWorkerRecord(r).ok()) << good;
    EXPECT_TRUE(DecodeWorkerRecord(EncodeWorkerRecord(r)).ok()) << good;
  }
}

TEST(WorkerRecordTest, ValidateNeedsAnAddressAndUtf8) {
  WorkerRecord r = SampleWorker();
  EXPECT_TRUE(ValidateWorkerRecord(r).ok());
  r.address = "";
  EXPECT_EQ(ValidateWorkerRecord(r).code(), StatusCode::kInvalidArgument);
  r.address = "h:1";
  r.metrics_address = "\xff";
  EXPECT_EQ(ValidateWorkerRecord(r).code(), StatusCode::kInvalidArgument);
}

MountSpec SampleMount() {
  MountSpec m;
  m.path = "/datasets/imagenet";
  m.uri = "s3://bucket-a/prefix";
  m.options = {{"endpoint", "http://10.0.0.1:9000"}, {"profile", "lake"}};
  m.metadata_ttl = std::chrono::seconds(30);
  m.replicas = 3;
  m.read_only = true;
  return m;
}

void ExpectSameMount(const MountSpec& a, const MountSpec& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.uri, b.uri);
  EXPECT_EQ(a.options, b.options);
  EXPECT_EQ(a.metadata_ttl, b.metadata_ttl);
  EXPECT_EQ(a.replicas, b.replicas);
  EXPECT_EQ(a.read_only, b.read_only);
  EXPECT_EQ(a.write_back, b.write_back);
}

TEST(MountTableCodecTest, RoundTripsInOrder) {
  MountSpec second;
  second.path = "/local";
  second.uri = "file:///data/lake";
  second.metadata_ttl = std::chrono::microseconds(0);
  second.read_only = false;
  second.write_back = true;
  std::vector<MountSpec> mounts = {SampleMount(), second};
  const std::string doc = EncodeMountTable(mounts);
  EXPECT_NE(doc.find("\"version\":1"), std::string::npos) << doc;
  StatusOr<std::vector<MountSpec>> back = DecodeMountTable(doc);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  ExpectSameMount((*back)[0], mounts[0]);
  ExpectSameMount((*back)[1], mounts[1]);
}

TEST(MountTableCodecTest, EmptyTableRoundTrips) {
  StatusOr<std::vector<MountSpec>> back = DecodeMountTable(EncodeMountTable({}));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->empty());
}

TEST(MountTableCodecTest, TtlIsStoredInWholeMilliseconds) {
  MountSpec m = SampleMount();
  m.metadata_ttl = std::chrono::microseconds(1500);
  StatusOr<std::vector<MountSpec>> back = DecodeMountTable(EncodeMountTable({m}));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)[0].metadata_ttl, std::chrono::milliseconds(1));
}

TEST(MountTableCodecTest, DecodeIgnoresUnknownFieldsAndDefaultsOptionalOnes) {
  StatusOr<std::vector<MountSpec>> back = DecodeMountTable(
      R"({"version":1,"owner":"ops","mounts":[{"path":"/a","uri":"file:///a","future":true}]})");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 1u);
  MountSpec want;
  want.path = "/a";
  want.uri = "file:///a";
  ExpectSameMount((*back)[0], want);
}

TEST(MountTableCodecTest, DecodeRejectsMalformedDocuments) {
  const char* bad[] = {
      "",
      "{",
      R"([])",
      R"({"mounts":[]})",                // No version.
      R"({"version":2,"mounts":[]})",    // Another version.
      R"({"version":"1","mounts":[]})",  // Wrong type.
      R"({"version":1})",                // No mounts.
      R"({"version":1,"mounts":{}})",    // Not an array.
      R"({"version":1,"mounts":[7]})",
      R"({"version":1,"mounts":[{"uri":"file:///a"}]})",
      R"({"version":1,"mounts":[{"path":"/a"}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","options":[]}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","options":{"region":1}}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","metadata_ttl_ms":-1}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","metadata_ttl_ms":1e3}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","replicas":4294967296}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","read_only":"true"}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","write_back":1}]})",
      R"({"version":1,"mounts":[{"path":"/a","uri":"file:///a","write_back":true}]})",
  };
  for (const char* text : bad) {
    EXPECT_EQ(DecodeMountTable(text).status().code(), StatusCode::kInvalidArgument) << text;
  }
}

TEST(MountTableCodecTest, ErrorsNameTheMountIndex) {
  Status st = DecodeMountTable(R"({"version":1,"mounts":[{"path":"/a","uri":"u"},{"path":"/b"}]})")
                  .status();
  EXPECT_NE(st.message().find("mounts[1]"), std::string::npos) << st.ToString();
}

TEST(Utf8Test, RecognisesValidAndInvalidSequences) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xff\xfe"));
}

}  // namespace
}  // namespace cairn::membership
