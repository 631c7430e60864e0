#include "ufs/memory_ufs.h"

#include <algorithm>
#include <cstring>

#include "ufs/ufs_keys.h"

namespace cairn::ufs {

MemoryUnderStorage::MemoryUnderStorage(std::string root_uri, Clock* clock)
    : root_uri_(std::move(root_uri)), clock_(clock) {}

ObjectInfo MemoryUnderStorage::InfoOf(const std::string& key, const Object& obj) const {
  ObjectInfo info;
  info.key = key;
  info.size = obj.data->size();
  info.version = obj.version;
  info.mtime_ns = obj.mtime_ns;
  return info;
}

StatusOr<ObjectInfo> MemoryUnderStorage::Stat(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return NotFoundError("no such object '" + std::string(key) + "' in " + root_uri_);
  }
  return InfoOf(it->first, it->second);
}

StatusOr<ListResult> MemoryUnderStorage::List(const ListOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortablePrefix(options.prefix));
  CAIRN_ASSIGN_OR_RETURN(int page_size, EffectivePageSize(options));
  ListPageBuilder builder(options, page_size);
  MutexLock lock(&mu_);
  // Objects and recorded directories ("d/", as the marker S3 would hold) in key order.
  std::vector<std::pair<std::string, const Object*>> items;
  bool directory_exists = false;
  for (auto it = objects_.lower_bound(options.prefix);
       it != objects_.end() && std::string_view(it->first).starts_with(options.prefix); ++it) {
    items.emplace_back(it->first, &it->second);
  }
  for (const std::string& dir : dirs_) {
    std::string marker = dir + "/";
    if (marker == options.prefix) directory_exists = true;
    if (marker.size() > options.prefix.size() && marker.starts_with(options.prefix)) {
      items.emplace_back(std::move(marker), nullptr);
    }
  }
  std::sort(items.begin(), items.end());
  const std::string& start = std::max(options.prefix, options.continuation_token);
  auto at = [&](const std::string& key) {
    return std::lower_bound(items.begin(), items.end(), key,
                            [](const auto& item, const std::string& k) { return item.first < k; });
  };
  for (auto it = at(start); it != items.end();) {
    ListPageBuilder::Verdict v;
    if (std::optional<std::string> cp = builder.CommonPrefixOf(it->first)) {
      v = builder.AddPrefix(*cp);
      // Everything under the common prefix is folded into it: jump past the whole range.
      std::string next = PrefixSuccessor(*cp);
      it = next.empty() ? items.end() : at(next);
    } else if (it->second == nullptr) {
      ++it;  // A directory deeper down in a recursive listing: not an object.
      continue;
    } else {
      const std::string& key = it->first;
      const Object& obj = *it->second;
      v = builder.AddObject(key, [&]() -> std::optional<ObjectInfo> { return InfoOf(key, obj); });
      ++it;
    }
    if (v == ListPageBuilder::Verdict::kFull) break;
  }
  ListResult result = std::move(builder).Finish();
  result.directory_exists = directory_exists;
  return result;
}

StatusOr<size_t> MemoryUnderStorage::Read(std::string_view key, std::string_view expected_version,
                                          uint64_t offset, std::span<char> out) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  std::shared_ptr<const std::string> data;
  {
    MutexLock lock(&mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) {
      return NotFoundError("no such object '" + std::string(key) + "' in " + root_uri_);
    }
    if (!expected_version.empty() && it->second.version != expected_version) {
      return FailedPreconditionError("object '" + std::string(key) + "' in " + root_uri_ +
                                     " changed: expected version " + std::string(expected_version) +
                                     ", found " + it->second.version);
    }
    data = it->second.data;
  }
  if (offset >= data->size()) return size_t{0};
  size_t n = std::min<uint64_t>(out.size(), data->size() - offset);
  std::memcpy(out.data(), data->data() + offset, n);
  return n;
}

class MemoryUnderStorage::Writer : public ObjectWriter {
 public:
  Writer(MemoryUnderStorage* store, std::string key, PartLayout layout, WriteCondition condition)
      : store_(store),
        key_(std::move(key)),
        condition_(std::move(condition)),
        layout_(layout),
        ledger_(layout) {}

  const PartLayout& layout() const override { return layout_; }

  ~Writer() override {
    MutexLock lock(&mu_);
    if (!token_.empty()) store_->EndUpload(token_);  // An abort, as a real store's writer does.
  }

  Status WritePart(uint32_t index, std::span<const char> data) override {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    CAIRN_RETURN_IF_ERROR(ledger_.CheckFullPart(index, data.size()));
    if (token_.empty()) token_ = store_->BeginUpload(key_);
    parts_[index].assign(data.data(), data.size());
    ledger_.Record(index, data.size());
    return Status::Ok();
  }

  std::string UploadToken() const override {
    MutexLock lock(&mu_);
    return token_;
  }

  Status Begin() override {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    if (token_.empty()) token_ = store_->BeginUpload(key_);
    return Status::Ok();
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    std::string content;
    {
      MutexLock lock(&mu_);
      CAIRN_RETURN_IF_ERROR(CheckOpen());
      CAIRN_ASSIGN_OR_RETURN(uint32_t count, ledger_.CheckCommit(size, tail.size()));
      content.reserve(size);
      for (uint32_t i = 0; i + 1 < count; ++i) content += parts_[i];
      content.append(tail.data(), tail.size());
    }
    CAIRN_ASSIGN_OR_RETURN(ObjectInfo info, store_->StoreIf(key_, std::move(content), condition_));
    MutexLock lock(&mu_);
    committed_ = true;
    parts_.clear();
    if (!token_.empty()) store_->EndUpload(token_);
    token_.clear();
    return info;
  }

  void SetCondition(WriteCondition condition) override { condition_ = std::move(condition); }

  Status Abort() override {
    MutexLock lock(&mu_);
    if (committed_) return FailedPreconditionError("write of '" + key_ + "' already committed");
    aborted_ = true;
    parts_.clear();
    if (!token_.empty()) store_->EndUpload(token_);
    token_.clear();
    return Status::Ok();
  }

 private:
  Status CheckOpen() const REQUIRES(mu_) {
    if (committed_ || aborted_) {
      return FailedPreconditionError("write of '" + key_ + "' already " +
                                     (committed_ ? "committed" : "aborted"));
    }
    if (!token_.empty() && store_->UploadAborted(token_)) {
      return FailedPreconditionError("the upload of '" + key_ + "' was aborted");
    }
    return Status::Ok();
  }

  MemoryUnderStorage* const store_;
  const std::string key_;
  WriteCondition condition_;
  const PartLayout layout_;
  mutable Mutex mu_;  // Before the store's.
  PartLedger ledger_ GUARDED_BY(mu_);
  std::map<uint32_t, std::string> parts_ GUARDED_BY(mu_);
  std::string token_ GUARDED_BY(mu_);  // From the first part to Commit or Abort.
  bool committed_ GUARDED_BY(mu_) = false;
  bool aborted_ GUARDED_BY(mu_) = false;
};

std::string MemoryUnderStorage::BeginUpload(const std::string& key) {
  MutexLock lock(&mu_);
  std::string token = "mem-upload-" + std::to_string(next_upload_++);
  uploads_[token] = Upload{key, false};
  return token;
}

bool MemoryUnderStorage::UploadAborted(const std::string& token) const {
  MutexLock lock(&mu_);
  auto it = uploads_.find(token);
  return it != uploads_.end() && it->second.aborted;
}

void MemoryUnderStorage::EndUpload(const std::string& token) {
  MutexLock lock(&mu_);
  uploads_.erase(token);
}

Status MemoryUnderStorage::AbortUpload(std::string_view key, std::string_view token) {
  if (!token.starts_with("mem-upload-")) {
    return InvalidArgumentError("not an upload token of this store: " + std::string(token));
  }
  MutexLock lock(&mu_);
  auto it = uploads_.find(token);
  if (it != uploads_.end() && it->second.key == key) it->second.aborted = true;
  return Status::Ok();
}

size_t MemoryUnderStorage::OpenUploads() const {
  MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [token, upload] : uploads_) n += upload.aborted ? 0 : 1;
  return n;
}

StatusOr<std::unique_ptr<ObjectWriter>> MemoryUnderStorage::StartWrite(
    std::string_view key, const WriterOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  CAIRN_ASSIGN_OR_RETURN(PartLayout layout, PartLayout::Create(options.part_size));
  return std::unique_ptr<ObjectWriter>(
      std::make_unique<Writer>(this, std::string(key), layout, options.condition));
}

std::string MemoryUnderStorage::Store(std::string_view key, std::string_view data) {
  StatusOr<ObjectInfo> info = StoreIf(key, std::string(data), WriteCondition::None());
  return info->version;  // Unconditional: cannot fail.
}

StatusOr<ObjectInfo> MemoryUnderStorage::StoreIf(std::string_view key, std::string data,
                                                 const WriteCondition& condition) {
  auto content = std::make_shared<const std::string>(std::move(data));
  int64_t now = clock_->WallNanos();
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  switch (condition.kind) {
    case WriteCondition::Kind::kNone:
      break;
    case WriteCondition::Kind::kAbsent:
      if (it != objects_.end()) {
        return AlreadyExistsError("object '" + std::string(key) + "' in " + root_uri_ +
                                  " already exists");
      }
      break;
    case WriteCondition::Kind::kVersion:
      if (it == objects_.end() || it->second.version != condition.version) {
        return FailedPreconditionError(
            "object '" + std::string(key) + "' in " + root_uri_ + " is no longer version " +
            condition.version + " (" +
            (it == objects_.end() ? std::string("deleted") : "now " + it->second.version) + ")");
      }
      break;
  }
  Object& obj = objects_[std::string(key)];
  obj.data = std::move(content);
  obj.version = "m" + std::to_string(next_version_++);
  obj.mtime_ns = now;
  return InfoOf(std::string(key), obj);
}

Status MemoryUnderStorage::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return NotFoundError("no such object '" + std::string(key) + "' in " + root_uri_);
  }
  objects_.erase(it);
  return Status::Ok();
}

bool MemoryUnderStorage::HasChildren(std::string_view key) const {
  const std::string prefix = std::string(key) + "/";
  auto object = objects_.lower_bound(prefix);
  if (object != objects_.end() && object->first.starts_with(prefix)) return true;
  auto dir = dirs_.lower_bound(prefix);
  return dir != dirs_.end() && dir->starts_with(prefix);
}

StatusOr<ObjectInfo> MemoryUnderStorage::Rename(std::string_view from, std::string_view to,
                                                const RenameOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(from));
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(to));
  if (from == to) return InvalidArgumentError("rename of '" + std::string(from) + "' onto itself");
  if (options.condition.kind == WriteCondition::Kind::kVersion) {
    return InvalidArgumentError("a rename takes no version condition on its destination");
  }
  MutexLock lock(&mu_);
  auto it = objects_.find(from);
  if (it == objects_.end()) {
    if (dirs_.contains(from) || HasChildren(from)) {
      return UnimplementedError("'" + std::string(from) + "' in " + root_uri_ +
                                " is a directory: directories are not renamed here");
    }
    return NotFoundError("no such object '" + std::string(from) + "' in " + root_uri_);
  }
  if (!options.expected_version.empty() && it->second.version != options.expected_version) {
    return FailedPreconditionError("object '" + std::string(from) + "' in " + root_uri_ +
                                   " is no longer version " + options.expected_version);
  }
  if (dirs_.contains(to) || HasChildren(to)) {
    return InvalidArgumentError("'" + std::string(to) + "' in " + root_uri_ + " is a directory");
  }
  if (options.condition.kind == WriteCondition::Kind::kAbsent && objects_.contains(to)) {
    return AlreadyExistsError("object '" + std::string(to) + "' in " + root_uri_ +
                              " already exists");
  }
  Object moved = std::move(it->second);
  objects_.erase(it);
  Object& obj = objects_[std::string(to)];
  obj = std::move(moved);
  return InfoOf(std::string(to), obj);
}

Status MemoryUnderStorage::MakeDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  MutexLock lock(&mu_);
  if (objects_.contains(key) || dirs_.contains(key) || HasChildren(key)) {
    return AlreadyExistsError("'" + std::string(key) + "' in " + root_uri_ + " already exists");
  }
  dirs_.emplace(key);
  return Status::Ok();
}

Status MemoryUnderStorage::RemoveDir(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidatePortableKey(key));
  MutexLock lock(&mu_);
  if (objects_.contains(key)) {
    return InvalidArgumentError("'" + std::string(key) + "' in " + root_uri_ +
                                " is not a directory");
  }
  if (HasChildren(key)) {
    return FailedPreconditionError("directory '" + std::string(key) + "' in " + root_uri_ +
                                   " is not empty");
  }
  auto dir = dirs_.find(key);
  if (dir == dirs_.end()) {
    return NotFoundError("no such directory '" + std::string(key) + "' in " + root_uri_);
  }
  dirs_.erase(dir);
  return Status::Ok();
}

std::string MemoryUnderStorage::Put(std::string_view key, std::string_view data) {
  if (!ValidatePortableKey(key).ok()) return "";
  return Store(key, data);
}

std::optional<std::string> MemoryUnderStorage::Get(std::string_view key) const {
  MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return *it->second.data;
}

std::vector<std::string> MemoryUnderStorage::Keys() const {
  MutexLock lock(&mu_);
  std::vector<std::string> keys;
  keys.reserve(objects_.size());
  for (const auto& [key, obj] : objects_) keys.push_back(key);
  return keys;
}

size_t MemoryUnderStorage::ObjectCount() const {
  MutexLock lock(&mu_);
  return objects_.size();
}

uint64_t MemoryUnderStorage::TotalBytes() const {
  MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [key, obj] : objects_) total += obj.data->size();
  return total;
}

void MemoryUnderStorage::Clear() {
  MutexLock lock(&mu_);
  objects_.clear();
  dirs_.clear();
}

}  // namespace cairn::ufs
