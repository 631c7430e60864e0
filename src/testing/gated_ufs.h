// GatedUnderStorage: a test decorator whose reads wait at a Gate, so a test can hold a source
// read in flight (to make other requests join it, or to stall a worker) and release it later.
//
// Thread-safety: safe for concurrent use.
#ifndef CAIRN_TESTING_GATED_UFS_H_
#define CAIRN_TESTING_GATED_UFS_H_

#include <atomic>
#include <memory>

#include "testing/gate.h"
#include "ufs/ufs.h"

namespace cairn::testing {

class GatedUnderStorage : public ufs::UnderStorageWrapper {
 public:
  explicit GatedUnderStorage(std::shared_ptr<ufs::UnderStorage> target)
      : UnderStorageWrapper(std::move(target)) {}

  // Reads wait at the gate until it opens. A gate may be swapped in between tests' phases;
  // the old one must stay alive until every read held there has passed.
  void set_gate(std::shared_ptr<Gate> gate) { std::atomic_store(&gate_, std::move(gate)); }

  StatusOr<size_t> Read(std::string_view key, std::string_view expected_version, uint64_t offset,
                        std::span<char> out) override {
    if (std::shared_ptr<Gate> gate = std::atomic_load(&gate_)) gate->Pass();
    return UnderStorageWrapper::Read(key, expected_version, offset, out);
  }

 private:
  std::shared_ptr<Gate> gate_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_GATED_UFS_H_
