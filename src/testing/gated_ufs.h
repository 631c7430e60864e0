// GatedUnderStorage: a test decorator whose reads wait at a Gate, so a test can hold a source
// read in flight (to make other requests join it, or to stall a worker) and release it later;
// likewise the WritePart calls of its writers, whose greatest concurrency it records, and
// their Commit calls (a commit held in the source).
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

  // WritePart calls of writers started after this wait at `gate` (null: none).
  void set_write_gate(std::shared_ptr<Gate> gate) {
    std::atomic_store(&write_gate_, std::move(gate));
  }
  // Commit calls of writers started after this wait at `gate` (null: none).
  void set_commit_gate(std::shared_ptr<Gate> gate) {
    std::atomic_store(&commit_gate_, std::move(gate));
  }
  // The most WritePart calls seen in flight at once.
  int max_concurrent_parts() const { return max_parts_.load(); }

  StatusOr<std::unique_ptr<ufs::ObjectWriter>> StartWrite(
      std::string_view key, const ufs::WriterOptions& options) override {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ufs::ObjectWriter> writer,
                           UnderStorageWrapper::StartWrite(key, options));
    return std::unique_ptr<ufs::ObjectWriter>(std::make_unique<Writer>(
        std::move(writer), this, std::atomic_load(&write_gate_), std::atomic_load(&commit_gate_)));
  }

 private:
  class Writer : public ufs::ObjectWriterWrapper {
   public:
    Writer(std::unique_ptr<ufs::ObjectWriter> target, GatedUnderStorage* owner,
           std::shared_ptr<Gate> gate, std::shared_ptr<Gate> commit_gate)
        : ObjectWriterWrapper(std::move(target)),
          owner_(owner),
          gate_(std::move(gate)),
          commit_gate_(std::move(commit_gate)) {}
    StatusOr<ufs::ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
      if (commit_gate_ != nullptr) commit_gate_->Pass();
      return ObjectWriterWrapper::Commit(size, tail);
    }
    Status WritePart(uint32_t index, std::span<const char> data) override {
      int now = ++owner_->parts_now_;
      int seen = owner_->max_parts_.load();
      while (now > seen && !owner_->max_parts_.compare_exchange_weak(seen, now)) {
      }
      if (gate_ != nullptr) gate_->Pass();
      Status st = ObjectWriterWrapper::WritePart(index, data);
      --owner_->parts_now_;
      return st;
    }

   private:
    GatedUnderStorage* const owner_;
    const std::shared_ptr<Gate> gate_;
    const std::shared_ptr<Gate> commit_gate_;
  };

  std::shared_ptr<Gate> gate_;
  std::shared_ptr<Gate> write_gate_;
  std::shared_ptr<Gate> commit_gate_;
  std::atomic<int> parts_now_{0};
  std::atomic<int> max_parts_{0};
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_GATED_UFS_H_
