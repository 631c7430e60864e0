// The ObjectWriter contract and strict-S3 behaviour against Ceph's radosgw: signatures checked
// for real, conditional writes honoured by the server, multipart uploads with S3's ETags, abort.
// Fails (never skips) when Ceph is not installed: run scripts/install-deps.sh.
#include <gtest/gtest.h>

#include "radosgw/radosgw_process.h"
#include "ufs/object_writer_behaviour.h"
#include "ufs/s3_digest.h"
#include "ufs/ufs.h"

namespace cairn::ufs {
namespace {

using cairn::testing::RadosgwProcess;
using testing::ObjectWriterBehaviour;
using testing::WriterParam;

constexpr char kBucket[] = "cairn-writer";

RadosgwProcess* gateway = nullptr;

class GatewayEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto started = RadosgwProcess::Start({kBucket});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    gateway = started->release();
  }
  void TearDown() override {
    delete gateway;
    gateway = nullptr;
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new GatewayEnvironment);

std::shared_ptr<UnderStorage> Open(const std::string& prefix, const UfsOptions& options) {
  auto store = OpenUnderStorage(std::string("s3://") + kBucket + "/" + prefix, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? *store : nullptr;
}

std::shared_ptr<UnderStorage> MakeStore(const std::string& test_name) {
  if (gateway == nullptr) return nullptr;
  UfsOptions options = gateway->Options();
  // Renames of objects past 6 MiB copy in UploadPartCopy parts of 5 MiB (5 GiB in production).
  options.multipart_copy_threshold = 6 << 20;
  options.copy_part_size = 5 << 20;
  return Open(test_name, options);
}

INSTANTIATE_TEST_SUITE_P(Radosgw, ObjectWriterBehaviour,
                         ::testing::Values(WriterParam{.name = "radosgw",
                                                       .make_store = MakeStore,
                                                       .part_size = 5 << 20,
                                                       .atomic_exclusive_create = true,
                                                       .aborts_uploads = true}),
                         [](const auto& info) { return info.param.name; });

std::span<const char> Span(const std::string& s) { return {s.data(), s.size()}; }

TEST(RadosgwTest, AMultipartObjectCarriesS3sETagOfItsParts) {
  ASSERT_NE(gateway, nullptr);
  auto store = MakeStore("multipart-etag");
  ASSERT_NE(store, nullptr);
  WriterOptions options;
  options.part_size = 5 << 20;
  auto w = store->StartWrite("model.safetensors", options);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const std::string part0(5 << 20, 'x');
  const std::string tail(1234, 'y');
  ASSERT_TRUE((*w)->WritePart(0, Span(part0)).ok());
  auto info = (*w)->Commit(part0.size() + tail.size(), Span(tail));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->version, s3::MultipartETag({s3::Md5(part0), s3::Md5(tail)}))
      << "the writer recognises a commit whose reply was lost by this ETag";
}

TEST(RadosgwTest, AWrongSecretIsRefusedAndNothingIsWritten) {
  ASSERT_NE(gateway, nullptr);
  UfsOptions bad = gateway->Options();
  bad.secret_key = "not-the-secret";
  auto store = Open("wrong-secret", bad);
  ASSERT_NE(store, nullptr);
  Status st = store->Write("x", Span(std::string("data")));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  auto good = MakeStore("wrong-secret");
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->Stat("x").status().code(), StatusCode::kNotFound);
}

TEST(RadosgwTest, ReadsExpectingAnOldVersionAreRefusedByTheServer) {
  ASSERT_NE(gateway, nullptr);
  auto store = MakeStore("if-match-read");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write("obj", Span(std::string("version one"))).ok());
  auto v1 = store->Stat("obj");
  ASSERT_TRUE(v1.ok());
  ASSERT_TRUE(store->Write("obj", Span(std::string("version two"))).ok());
  std::string buf(32, '\0');
  auto n = store->Read("obj", v1->version, 0, std::span<char>(buf.data(), buf.size()));
  EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition) << n.status().ToString();
}

}  // namespace
}  // namespace cairn::ufs
