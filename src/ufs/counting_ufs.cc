#include "ufs/counting_ufs.h"

namespace cairn::ufs {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

StatusOr<ObjectInfo> CountingUnderStorage::Stat(std::string_view key) {
  stats_.fetch_add(1, kRelaxed);
  StatusOr<ObjectInfo> r = target()->Stat(key);
  CountError(r.ok());
  return r;
}

StatusOr<ListResult> CountingUnderStorage::List(const ListOptions& options) {
  lists_.fetch_add(1, kRelaxed);
  StatusOr<ListResult> r = target()->List(options);
  CountError(r.ok());
  return r;
}

StatusOr<size_t> CountingUnderStorage::Read(std::string_view key, std::string_view expected_version,
                                            uint64_t offset, std::span<char> out) {
  reads_.fetch_add(1, kRelaxed);
  StatusOr<size_t> r = target()->Read(key, expected_version, offset, out);
  CountError(r.ok());
  if (r.ok()) bytes_read_.fetch_add(*r, kRelaxed);
  return r;
}

Status CountingUnderStorage::Write(std::string_view key, std::span<const char> data) {
  writes_.fetch_add(1, kRelaxed);
  Status st = target()->Write(key, data);
  CountError(st.ok());
  if (st.ok()) bytes_written_.fetch_add(data.size(), kRelaxed);
  return st;
}

Status CountingUnderStorage::Delete(std::string_view key) {
  deletes_.fetch_add(1, kRelaxed);
  Status st = target()->Delete(key);
  CountError(st.ok());
  return st;
}

UfsCounts CountingUnderStorage::counts() const {
  UfsCounts c;
  c.stats = stats_.load(kRelaxed);
  c.lists = lists_.load(kRelaxed);
  c.reads = reads_.load(kRelaxed);
  c.writes = writes_.load(kRelaxed);
  c.deletes = deletes_.load(kRelaxed);
  c.errors = errors_.load(kRelaxed);
  c.bytes_read = bytes_read_.load(kRelaxed);
  c.bytes_written = bytes_written_.load(kRelaxed);
  return c;
}

void CountingUnderStorage::Reset() {
  for (auto* c :
       {&stats_, &lists_, &reads_, &writes_, &deletes_, &errors_, &bytes_read_, &bytes_written_}) {
    c->store(0, kRelaxed);
  }
}

}  // namespace cairn::ufs
