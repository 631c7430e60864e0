#include "worker/metadata_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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

// The pending files of a write-back mount at or under `path` (none elsewhere: read-only and
// write-through mounts never have any, and skip the lookup).
PendingFiles* PendingOn(const PageService& pages, const mount::Mount& mount) {
  return mount.spec.write_back ? pages.pending_files() : nullptr;
}

// How long a folder's listing or stat waits for the other workers' pending files at most.
constexpr std::chrono::milliseconds kMaxPeerPendingWait{1000};

// Adds a child holding pending files: a file goes over a folder of the same name; of two files
// (a ring change may leave one path pending at two workers) the later close wins.
void AddChild(std::map<std::string, mount::Entry>& children, mount::Entry child) {
  auto it = children.find(child.name);
  if (it == children.end()) {
    std::string name = child.name;
    children.emplace(std::move(name), std::move(child));
  } else if (!child.is_dir && (it->second.is_dir || child.mtime_ns > it->second.mtime_ns)) {
    it->second = std::move(child);
  }
}

// This worker's pending files under folder `dir`, as the children of `dir` that hold them.
std::map<std::string, mount::Entry> LocalPendingChildren(PendingFiles& pending,
                                                         const std::string& dir) {
  const std::string prefix = dir == "/" ? "/" : dir + "/";
  std::map<std::string, mount::Entry> children;
  for (PendingFiles::Entry& file : pending.PendingUnder(dir)) {
    std::string rest = file.path.substr(prefix.size());
    const size_t slash = rest.find('/');
    mount::Entry child;
    child.name = rest.substr(0, slash);
    if (slash != std::string::npos) {
      child.is_dir = true;
    } else {
      child.size = file.size;
      child.version = std::move(file.version);
      child.mtime_ns = file.mtime_ns;
    }
    AddChild(children, std::move(child));
  }
  return children;
}

// Shows the `children` of directory `dir` that hold pending files on one page of its source
// listing (`entries`, sorted by name), each name on exactly one page: a pending file replaces
// the source's entry of its name (its newer size and version) on the page that lists it; a name
// the source does not have goes on the last page (so a listing of several pages is sorted
// within each page, not across them; `in_source` asks the source about a name only when the
// listing has several pages and the name sorts before the last page's end). Deeper pending
// files show as their first folder.
void OverlayPending(std::map<std::string, mount::Entry> children, bool first_page, bool last_page,
                    const std::function<bool(const std::string&)>& in_source,
                    std::vector<mount::Entry>* entries) {
  if (children.empty()) return;
  const std::string last = entries->empty() ? "" : entries->back().name;
  std::vector<mount::Entry> added;  // Appended after the loop: `entries` stays sorted in it.
  for (auto& [name, child] : children) {
    auto it =
        std::lower_bound(entries->begin(), entries->end(), name,
                         [](const mount::Entry& e, const std::string& n) { return e.name < n; });
    if (it != entries->end() && it->name == name) {
      if (!it->is_dir && !child.is_dir) *it = std::move(child);
      continue;
    }
    if (!last_page) continue;
    // Certainly not in the source: the whole listing is this page, or the name sorts after it.
    const bool absent = first_page || (!entries->empty() && name > last);
    if (absent || !in_source(name)) added.push_back(std::move(child));
  }
  if (added.empty()) return;
  for (mount::Entry& e : added) entries->push_back(std::move(e));
  mount::SortUniqueByName(*entries);
}

protocol::DirEntry PendingDirEntry(std::string name, const PendingFiles::Entry& file) {
  return protocol::DirEntry{std::move(name), false, file.size, file.version, file.mtime_ns};
}

}  // namespace

MetadataService::MetadataService(PageService* pages)
    : pages_(pages),
      peer_pending_(pages->options().peers == nullptr
                        ? nullptr
                        : std::make_unique<PeerPending>(
                              pages->options().peers,
                              std::min(pages->options().peer_timeout, kMaxPeerPendingWait),
                              pages->options().clock,
                              pages->registry() == nullptr
                                  ? nullptr
                                  : pages->registry()->AddCounter(PeerPending::kFailuresMetric,
                                                                  PeerPending::kFailuresHelp))) {}

StatusOr<protocol::MetadataReply> MetadataService::Serve(const protocol::MetadataRequest& request,
                                                         const auth::Visibility& visible,
                                                         bool wait) {
  if (const auto* stat = std::get_if<protocol::StatPathRequest>(&request)) {
    return Stat(*stat, visible, wait);
  }
  if (const auto* pending = std::get_if<protocol::ListPendingRequest>(&request)) {
    return ListPending(*pending);
  }
  return List(std::get<protocol::ListDirRequest>(request), visible, wait);
}

std::map<std::string, mount::Entry> MetadataService::PendingChildren(PendingFiles& pending,
                                                                     const std::string& dir,
                                                                     bool ask_peers) {
  std::map<std::string, mount::Entry> children = LocalPendingChildren(pending, dir);
  if (!ask_peers || peer_pending_ == nullptr) return children;
  for (protocol::DirEntry& e : peer_pending_->ChildrenUnder(dir)) {
    // A peer's file entry names the pending version its reader will ask that peer for.
    if (e.name.empty() || (!e.is_dir && !protocol::IsPendingVersion(e.version))) continue;
    mount::Entry child;
    child.name = std::move(e.name);
    child.is_dir = e.is_dir;
    if (!e.is_dir) {
      child.size = e.size;
      child.version = std::move(e.version);
      child.mtime_ns = e.mtime_ns;
    }
    AddChild(children, std::move(child));
  }
  return children;
}

StatusOr<protocol::MetadataReply> MetadataService::ListPending(
    const protocol::ListPendingRequest& request) {
  protocol::MetadataReply reply;
  // A mount this worker does not know (yet) holds nothing of its own: an empty answer, not an
  // error (which would make the asker leave this worker out for a while).
  StatusOr<PageService::PathAt> at = pages_->ResolvePath(request.path, false);
  if (!at.ok() || at->resolved.mount == nullptr) return reply;
  PendingFiles* pending = PendingOn(*pages_, *at->resolved.mount);
  if (pending == nullptr) return reply;
  for (auto& [name, child] : LocalPendingChildren(*pending, request.path)) {
    if (reply.entries.size() == protocol::kMaxListEntries) break;  // What one reply carries.
    reply.entries.push_back(ToDirEntry(std::move(child)));
  }
  return reply;
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
  PendingFiles* pending = PendingOn(*pages_, *at.resolved.mount);
  if (pending != nullptr) {
    if (std::optional<PendingFiles::Entry> file = pending->PendingStat(request.path)) {
      reply.entries.push_back(visible.everything ? PendingDirEntry(name, *file)
                                                 : DirectoryNamed(name));
      return reply;
    }
  }
  StatusOr<mount::Entry> entry = mount::StatKey(*at.resolved.mount, at.resolved.key, name);
  if (!entry.ok() && entry.status().code() == StatusCode::kNotFound && pending != nullptr &&
      !PendingChildren(*pending, request.path, /*ask_peers=*/true).empty()) {
    reply.entries.push_back(DirectoryNamed(name));  // Holds files not uploaded yet.
    return reply;
  }
  if (!entry.ok()) return entry.status();
  // On the way down to a grant only: that something is there, not what.
  reply.entries.push_back(visible.everything ? ToDirEntry(std::move(entry).value())
                                             : DirectoryNamed(name));
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
  PendingFiles* pending = PendingOn(*pages_, mount);
  // Asked once per page, and only where the mount is write-back.
  std::optional<std::map<std::string, mount::Entry>> children;
  auto pending_children = [&]() -> std::map<std::string, mount::Entry>& {
    if (!children) children = PendingChildren(*pending, request.path, /*ask_peers=*/true);
    return *children;
  };
  if (!at.resolved.key.empty() && request.token.empty()) {
    // A file is not a directory (an empty listing of it would say it is an empty one). Once
    // per listing, on its first page.
    if (pending != nullptr && pending->PendingStat(request.path)) {
      return InvalidArgumentError(request.path + " is not a directory");
    }
    auto self = mount::StatKey(mount, at.resolved.key, "");
    if (self.ok() && !self->is_dir) {
      return InvalidArgumentError(request.path + " is not a directory");
    }
    if (!self.ok() && !(self.status().code() == StatusCode::kNotFound && pending != nullptr &&
                        !pending_children().empty())) {
      return self.status();
    }
  }
  CAIRN_ASSIGN_OR_RETURN(mount::Listing listed,
                         mount::ListDirectory(mount, at.resolved.key, request.token,
                                              static_cast<int>(request.max_entries)));
  if (pending != nullptr) {
    // A name between two pages: whether the source has it (an error counts as yes: the page
    // that lists it, if any, shows it; a listing never shows a name twice).
    auto in_source = [&](const std::string& name) {
      const std::string key = at.resolved.key.empty() ? name : at.resolved.key + "/" + name;
      auto found = mount::StatKey(mount, key, name);
      return found.ok() || found.status().code() != StatusCode::kNotFound;
    };
    OverlayPending(std::move(pending_children()), request.token.empty(), listed.next_token.empty(),
                   in_source, &listed.entries);
  }
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
