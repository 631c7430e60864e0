// OpenUnderStorage dispatch and Probe.
#include "ufs/ufs.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ufs/fault_injecting_ufs.h"
#include "ufs/memory_ufs.h"
#include "ufs/retrying_ufs.h"

namespace cairn::ufs {
namespace {

TEST(OpenUnderStorageTest, DispatchesOnScheme) {
  auto unknown = OpenUnderStorage("gs://bucket/x", UfsOptions());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), "unknown source scheme 'gs' (supported: file, s3)");
  EXPECT_EQ(OpenUnderStorage("no-scheme", UfsOptions()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStorage("file:///definitely/not/here", UfsOptions()).status().code(),
            StatusCode::kNotFound);

  std::string tmp = std::filesystem::temp_directory_path().string();
  auto local = OpenUnderStorage("file://" + tmp + "/", UfsOptions());
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  EXPECT_EQ((*local)->RootUri(), "file://" + tmp);

  UfsOptions o;
  o.endpoint = "http://127.0.0.1:1";
  o.access_key = "a";
  o.secret_key = "b";
  auto s3 = OpenUnderStorage("s3://bucket/some/prefix/", o);
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ((*s3)->RootUri(), "s3://bucket/some/prefix");
  EXPECT_NE(dynamic_cast<RetryingUnderStorage*>(s3->get()), nullptr);

  o.endpoint = "ftp://nope";
  EXPECT_EQ(OpenUnderStorage("s3://bucket", o).status().code(), StatusCode::kInvalidArgument);
  o.endpoint = "http://127.0.0.1:1";
  o.max_connections = 0;
  EXPECT_EQ(OpenUnderStorage("s3://bucket", o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ProbeTest, MapsFailuresToActionableMessages) {
  auto memory = std::make_shared<MemoryUnderStorage>("mem://probe");
  FakeClock clock;
  FaultInjectingUnderStorage ufs(memory, 1, &clock);
  EXPECT_TRUE(Probe(ufs).ok());
  struct Case {
    Status injected;
    StatusCode want;
    std::string phrase;
  };
  for (const Case& c : std::vector<Case>{
           {UnavailableError("connection refused"), StatusCode::kUnavailable, "cannot reach"},
           {DeadlineExceededError("timed out"), StatusCode::kDeadlineExceeded, "cannot reach"},
           {PermissionDeniedError("403"), StatusCode::kPermissionDenied, "wrong credentials"},
           {NotFoundError("NoSuchBucket"), StatusCode::kNotFound, "missing bucket"},
           {InvalidArgumentError("bad"), StatusCode::kInvalidArgument, "probe of mem://probe"},
       }) {
    ufs.FailNext(UfsOp::kList, 1, c.injected);
    Status st = Probe(ufs);
    EXPECT_EQ(st.code(), c.want) << st.ToString();
    EXPECT_NE(st.message().find(c.phrase), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(c.injected.message()), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace cairn::ufs
