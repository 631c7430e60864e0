#include "ufs/ufs_keys.h"

#include <algorithm>

namespace cairn::ufs {
namespace {

std::string Quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\0') {
      out += "\\0";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

// Checks the components of `path`; the last one may be empty or partial when `last_may_be_empty`.
Status ValidateComponents(std::string_view path, bool last_may_be_empty, std::string_view what) {
  if (path.find('\0') != std::string_view::npos) {
    return InvalidArgumentError(std::string(what) + " " + Quoted(path) + " contains a NUL byte");
  }
  if (!path.empty() && path.front() == '/') {
    return InvalidArgumentError(std::string(what) + " " + Quoted(path) +
                                " must be relative (no leading '/')");
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    bool last = slash == std::string_view::npos;
    std::string_view comp = path.substr(start, last ? std::string_view::npos : slash - start);
    if (comp.empty() && !(last && last_may_be_empty)) {
      return InvalidArgumentError(std::string(what) + " " + Quoted(path) +
                                  " has an empty path component");
    }
    if (comp == "." || comp == "..") {
      return InvalidArgumentError(std::string(what) + " " + Quoted(path) +
                                  " has a '.' or '..' component");
    }
    if (last) break;
    start = slash + 1;
  }
  return Status::Ok();
}

}  // namespace

Status ValidatePortableKey(std::string_view key) {
  if (key.empty()) return InvalidArgumentError("empty object key");
  return ValidateComponents(key, /*last_may_be_empty=*/false, "key");
}

Status ValidatePortablePrefix(std::string_view prefix) {
  if (prefix.empty()) return Status::Ok();
  return ValidateComponents(prefix, /*last_may_be_empty=*/true, "list prefix");
}

StatusOr<int> EffectivePageSize(const ListOptions& options) {
  if (options.max_keys < 1) {
    return InvalidArgumentError("max_keys must be at least 1, got " +
                                std::to_string(options.max_keys));
  }
  return std::min(options.max_keys, kMaxListPage);
}

std::string PrefixSuccessor(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xff) s.pop_back();
  if (s.empty()) return s;
  s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

ListPageBuilder::ListPageBuilder(const ListOptions& options, int page_size)
    : prefix_(options.prefix),
      delimiter_(options.delimiter),
      token_(options.continuation_token),
      page_size_(page_size) {}

std::optional<std::string> ListPageBuilder::CommonPrefixOf(std::string_view key) const {
  if (delimiter_.empty() || !key.starts_with(prefix_)) return std::nullopt;
  size_t pos = key.find(delimiter_, prefix_.size());
  if (pos == std::string_view::npos) return std::nullopt;
  return std::string(key.substr(0, pos + delimiter_.size()));
}

ListPageBuilder::Verdict ListPageBuilder::Admit(std::string_view item) {
  if (full_) return Verdict::kFull;
  if (!item.starts_with(prefix_)) return Verdict::kSkipped;
  if (!token_.empty()) {
    if (item <= token_) return Verdict::kSkipped;
    // A token that is a common prefix stands for everything under it: all of it was reported.
    bool token_is_prefix =
        !delimiter_.empty() && token_.size() > prefix_.size() && token_.ends_with(delimiter_);
    if (token_is_prefix && item.starts_with(token_)) return Verdict::kSkipped;
  }
  if (taken_ >= page_size_) {
    full_ = true;
    result_.next_token = last_item_;
    return Verdict::kFull;
  }
  return Verdict::kTaken;
}

ListPageBuilder::Verdict ListPageBuilder::AddObject(
    std::string_view key, const std::function<std::optional<ObjectInfo>()>& stat) {
  if (auto cp = CommonPrefixOf(key)) return AddPrefix(*cp);
  Verdict v = Admit(key);
  if (v != Verdict::kTaken) return v;
  std::optional<ObjectInfo> info = stat();
  if (!info) return Verdict::kSkipped;
  info->key = std::string(key);
  result_.objects.push_back(std::move(*info));
  ++taken_;
  last_item_ = std::string(key);
  return Verdict::kTaken;
}

ListPageBuilder::Verdict ListPageBuilder::AddPrefix(std::string_view common_prefix) {
  if (full_) return Verdict::kFull;
  if (taken_ > 0 && common_prefix == last_item_) return Verdict::kTaken;
  Verdict v = Admit(common_prefix);
  if (v != Verdict::kTaken) return v;
  result_.common_prefixes.emplace_back(common_prefix);
  ++taken_;
  last_item_ = std::string(common_prefix);
  return Verdict::kTaken;
}

ListResult ListPageBuilder::Finish() && { return std::move(result_); }

}  // namespace cairn::ufs
