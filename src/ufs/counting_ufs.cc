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

class CountingUnderStorage::Writer : public ObjectWriterWrapper {
 public:
  Writer(std::unique_ptr<ObjectWriter> target, CountingUnderStorage* owner)
      : ObjectWriterWrapper(std::move(target)), owner_(owner) {}

  Status WritePart(uint32_t index, std::span<const char> data) override {
    Status st = target()->WritePart(index, data);
    owner_->CountError(st.ok());
    if (st.ok()) owner_->bytes_written_.fetch_add(data.size(), kRelaxed);
    return st;
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    owner_->writes_.fetch_add(1, kRelaxed);
    StatusOr<ObjectInfo> result = target()->Commit(size, tail);
    owner_->CountError(result.ok());
    if (result.ok()) owner_->bytes_written_.fetch_add(tail.size(), kRelaxed);
    return result;
  }

 private:
  CountingUnderStorage* const owner_;
};

StatusOr<std::unique_ptr<ObjectWriter>> CountingUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> writer, target()->StartWrite(key, options));
  return std::unique_ptr<ObjectWriter>(std::make_unique<Writer>(std::move(writer), this));
}

Status CountingUnderStorage::Delete(std::string_view key) {
  deletes_.fetch_add(1, kRelaxed);
  Status st = target()->Delete(key);
  CountError(st.ok());
  return st;
}

StatusOr<ObjectInfo> CountingUnderStorage::Rename(std::string_view from, std::string_view to,
                                                  const RenameOptions& options) {
  writes_.fetch_add(1, kRelaxed);
  StatusOr<ObjectInfo> r = target()->Rename(from, to, options);
  CountError(r.ok());
  return r;
}

Status CountingUnderStorage::MakeDir(std::string_view key) {
  writes_.fetch_add(1, kRelaxed);
  Status st = target()->MakeDir(key);
  CountError(st.ok());
  return st;
}

Status CountingUnderStorage::RemoveDir(std::string_view key) {
  deletes_.fetch_add(1, kRelaxed);
  Status st = target()->RemoveDir(key);
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
