// The ObjectWriter contract (ufs/object_writer_behaviour.h) against s3rver. s3rver is lax: it
// ignores If-None-Match and If-Match on writes (the writer's HEAD just before the commit is what
// refuses there, so racing exclusive creators are not checked) and has no
// AbortMultipartUpload. ufs_radosgw_test runs the same suite against a strict server.
#include <gtest/gtest.h>

#include "ufs/object_writer_behaviour.h"
#include "ufs_s3/s3rver_process.h"

namespace cairn::ufs {
namespace {

using cairn::testing::S3rverProcess;
using testing::ObjectWriterBehaviour;
using testing::WriterParam;

constexpr char kBucket[] = "cairn-writer";

// One server per test process, started by the first test that needs it.
S3rverProcess& Server() {
  static std::unique_ptr<S3rverProcess> server = [] {
    auto started = S3rverProcess::Start({kBucket});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    return started.ok() ? std::move(started).value() : nullptr;
  }();
  if (server == nullptr) std::abort();
  return *server;
}

std::shared_ptr<UnderStorage> MakeStore(const std::string& test_name) {
  auto store =
      OpenUnderStorage(std::string("s3://") + kBucket + "/" + test_name, Server().Options());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? *store : nullptr;
}

INSTANTIATE_TEST_SUITE_P(S3rver, ObjectWriterBehaviour,
                         ::testing::Values(WriterParam{.name = "s3rver",
                                                       .make_store = MakeStore,
                                                       .part_size = 5 << 20,
                                                       .atomic_exclusive_create = false,
                                                       .aborts_uploads = false}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace cairn::ufs
