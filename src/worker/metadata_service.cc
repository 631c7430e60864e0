#include "worker/metadata_service.h"

#include <variant>

#include "mount/namespace_ops.h"

namespace cairn::worker {
namespace {

std::string LastComponent(const std::string& path) {
  return path == "/" ? "" : path.substr(path.rfind('/') + 1);
}

protocol::DirEntry ToDirEntry(mount::Entry e) {
  return protocol::DirEntry{std::move(e.name), e.is_dir, e.size, std::move(e.version), e.mtime_ns};
}

protocol::DirEntry DirectoryNamed(std::string name) {
  protocol::DirEntry d;
  d.name = std::move(name);
  d.is_dir = true;
  return d;
}

}  // namespace

StatusOr<protocol::MetadataReply> MetadataService::Serve(const protocol::MetadataRequest& request,
                                                         const auth::Visibility& visible,
                                                         bool wait) {
  if (const auto* stat = std::get_if<protocol::StatPathRequest>(&request)) {
    return Stat(*stat, visible, wait);
  }
  return List(std::get<protocol::ListDirRequest>(request), visible, wait);
}

StatusOr<protocol::MetadataReply> MetadataService::Stat(const protocol::StatPathRequest& request,
                                                        const auth::Visibility& visible,
                                                        bool wait) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, pages_->ResolvePath(request.path, wait));
  const std::string name = LastComponent(request.path);
  protocol::MetadataReply reply;
  if (at.resolved.mount == nullptr || at.resolved.key.empty()) {
    reply.entries.push_back(DirectoryNamed(name));  // Above the mounts, or a mount's root.
    return reply;
  }
  CAIRN_ASSIGN_OR_RETURN(mount::Entry entry,
                         mount::StatKey(*at.resolved.mount, at.resolved.key, name));
  // On the way down to a grant only: that something is there, not what.
  reply.entries.push_back(visible.everything ? ToDirEntry(std::move(entry)) : DirectoryNamed(name));
  return reply;
}

StatusOr<protocol::MetadataReply> MetadataService::List(const protocol::ListDirRequest& request,
                                                        const auth::Visibility& visible,
                                                        bool wait) {
  CAIRN_ASSIGN_OR_RETURN(PageService::PathAt at, pages_->ResolvePath(request.path, wait));
  protocol::MetadataReply reply;
  if (at.resolved.mount == nullptr) {
    for (std::string& child : at.table->VirtualChildren(request.path)) {
      if (visible.Shows(child)) reply.entries.push_back(DirectoryNamed(std::move(child)));
    }
    return reply;
  }
  const mount::Mount& mount = *at.resolved.mount;
  if (!at.resolved.key.empty() && request.token.empty()) {
    // A file is not a directory (an empty listing of it would say it is an empty one). Once
    // per listing, on its first page.
    auto self = mount::StatKey(mount, at.resolved.key, "");
    if (self.ok() && !self->is_dir) {
      return InvalidArgumentError(request.path + " is not a directory");
    }
    if (!self.ok()) return self.status();
  }
  CAIRN_ASSIGN_OR_RETURN(mount::Listing listed,
                         mount::ListDirectory(mount, at.resolved.key, request.token,
                                              static_cast<int>(request.max_entries)));
  reply.next_token = std::move(listed.next_token);
  if (reply.next_token.size() > protocol::kMaxListToken) {
    return InternalError("the source's continuation token is longer than the protocol carries");
  }
  for (mount::Entry& e : listed.entries) {
    if (visible.Shows(e.name)) reply.entries.push_back(ToDirEntry(std::move(e)));
  }
  return reply;
}

}  // namespace cairn::worker
