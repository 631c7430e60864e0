// The behavioural contract of ObjectWriter (ufs.h), and of Rename, MakeDir and RemoveDir, as a
// parameterized GoogleTest suite, run by ufs_test against MemoryUnderStorage and LocalUnderStorage,
// by ufs_s3_test against s3rver and by ufs_radosgw_test against Ceph's radosgw. A test binary
// instantiates it with INSTANTIATE_TEST_SUITE_P(Name, ObjectWriterBehaviour,
// ::testing::Values(WriterParam{...})).
#ifndef CAIRN_UFS_OBJECT_WRITER_BEHAVIOUR_H_
#define CAIRN_UFS_OBJECT_WRITER_BEHAVIOUR_H_

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <memory>
#include <string>

#include "ufs/ufs.h"

namespace cairn::ufs::testing {

struct WriterParam {
  std::string name;
  // A fresh store (or a fresh prefix of a shared one) for one test.
  std::function<std::shared_ptr<UnderStorage>(const std::string& test_name)> make_store;
  uint64_t part_size = 64 << 10;  // Base of the layout the tests use (S3: at least 5 MiB).
  // Whether a losing exclusive create is refused even when two writers commit at the same time
  // (the store checks the condition atomically with the commit of a one-part object; s3rver
  // does not).
  bool atomic_exclusive_create = true;
  // Whether Abort reaches the store (false: s3rver has no AbortMultipartUpload and answers
  // Unimplemented, leaving the parts behind).
  bool aborts_uploads = true;
  // Whether Rename moves directories (folders: rename(2); S3 and memory: Unimplemented).
  bool renames_directories = false;
};

// Names the parameter in test output (instead of its bytes).
inline void PrintTo(const WriterParam& param, std::ostream* os) { *os << param.name; }

class ObjectWriterBehaviour : public ::testing::TestWithParam<WriterParam> {
 protected:
  void SetUp() override;

  StatusOr<std::unique_ptr<ObjectWriter>> Start(const std::string& key,
                                                WriteCondition condition = {});
  // `n` bytes that differ from part to part and from `seed` to seed.
  std::string Pattern(uint64_t n, char seed) const;
  // The object's bytes, or the read's error text.
  std::string ReadAll(const std::string& key);
  // Writes `content` through one writer: full parts, then Commit with the final part.
  StatusOr<ObjectInfo> WriteWhole(const std::string& key, const std::string& content,
                                  WriteCondition condition = {});

  std::shared_ptr<UnderStorage> store_;
  uint64_t part_ = 0;
};

}  // namespace cairn::ufs::testing

#endif  // CAIRN_UFS_OBJECT_WRITER_BEHAVIOUR_H_
