#include "fuse/dir_stream.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace cairn::fuse {

bool IsRepresentableName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

DirStream::DirStream(Client* client, std::string path, int page_entries)
    : client_(client), path_(std::move(path)), page_entries_(std::max(1, page_entries)) {
  checkpoints_.push_back(Checkpoint{0, ""});
}

Status DirStream::Start() { return LoadPage(0); }

Status DirStream::LoadPage(size_t page) {
  const Checkpoint checkpoint = checkpoints_[page];
  StatusOr<DirPage> listed = client_->ListDir(path_, checkpoint.token, page_entries_);
  pages_loaded_++;
  if (!listed.ok()) return listed.status();
  DirPage& result = *listed;
  if (result.entries.empty() && !result.next_token.empty() &&
      result.next_token == checkpoint.token) {
    return InternalError("listing of '" + path_ +
                         "' returned an empty page with an unchanged "
                         "continuation token");
  }

  std::vector<FileInfo> kept;
  kept.reserve(result.entries.size());
  for (FileInfo& info : result.entries) {
    if (!IsRepresentableName(info.name)) {
      spdlog::warn("fuse: skipping entry '{}' of '{}': not a valid file name", info.name, path_);
      continue;
    }
    kept.push_back(std::move(info));
  }

  entries_ = std::move(kept);
  next_token_ = std::move(result.next_token);
  page_ = page;
  loaded_ = true;

  // The checkpoint of the next page follows from this one. If a re-listing disagrees with what
  // was recorded, the listing changed: everything recorded after this page is stale.
  const uint64_t next_start = checkpoint.start + entries_.size();
  if (checkpoints_.size() > page + 1 &&
      (checkpoints_[page + 1].start != next_start || checkpoints_[page + 1].token != next_token_)) {
    checkpoints_.resize(page + 1);
  }
  if (!next_token_.empty() && checkpoints_.size() == page + 1) {
    checkpoints_.push_back(Checkpoint{next_start, next_token_});
  }
  return Status::Ok();
}

StatusOr<const FileInfo*> DirStream::At(uint64_t index) {
  if (!loaded_) CAIRN_RETURN_IF_ERROR(LoadPage(0));
  while (true) {
    const uint64_t start = checkpoints_[page_].start;
    const uint64_t end = start + entries_.size();
    if (index >= start && index < end) return &entries_[index - start];
    if (index >= end) {
      if (next_token_.empty()) return static_cast<const FileInfo*>(nullptr);
      CAIRN_RETURN_IF_ERROR(LoadPage(page_ + 1));
      continue;
    }
    // Backwards: restart from the last page that starts at or before `index`.
    size_t page = 0;
    for (size_t k = 0; k < checkpoints_.size() && checkpoints_[k].start <= index; ++k) page = k;
    // Its start is <= index, so the next iteration either finds the entry or walks forward.
    CAIRN_RETURN_IF_ERROR(LoadPage(page));
  }
}

}  // namespace cairn::fuse
