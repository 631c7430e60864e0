#include "client/client_impl.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>

#include "client/file_reader.h"
#include "client/file_writer.h"
#include "client/room_wait.h"
#include "mount/namespace_ops.h"
#include "tls/tls_context.h"
#include "transport/remote_channel.h"
#include "protocol/wire.h"

namespace cairn::client {
namespace {

constexpr size_t kMaxMetadataEntries = 1 << 20;
// What a forked child's client gets of its parent's cache (the newest entries): copied at every
// fork of a process with a client, so bounded. A listing page of 1,000 names is one entry.
constexpr size_t kMaxSeedEntries = 1 << 16;
// How old a lookup's "no such file" may be for a create to pass it on as what it saw
// (OpenWriteRequest::seen_absent). The kernel creates right after its lookup (a loaded machine
// may stall it a while); a longer window only widens the time in which an object that appears
// meanwhile makes the commit fail rather than be replaced.
constexpr int64_t kSeenAbsentMaxAgeUs = 5'000'000;

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

FileInfo DirInfo(std::string name) {
  FileInfo info;
  info.name = std::move(name);
  info.is_dir = true;
  return info;
}

FileInfo ToFileInfo(mount::Entry entry) {
  FileInfo info;
  info.name = std::move(entry.name);
  info.is_dir = entry.is_dir;
  info.size = entry.size;
  info.version = std::move(entry.version);
  info.mtime_ns = entry.mtime_ns;
  return info;
}

// A channel that forwards to one not-owned channel (the in-process worker).
class BorrowedChannel : public protocol::PageChannel {
 public:
  explicit BorrowedChannel(protocol::PageChannel* target) : target_(target) {}
  void Call(const protocol::Request& request, std::span<char> dest, Callback done) override {
    target_->Call(request, dest, std::move(done));
  }
  void CallWrite(const protocol::WriteRequest& request, WriteCallback done) override {
    target_->CallWrite(request, std::move(done));
  }
  void CallMetadata(const protocol::MetadataRequest& request, MetadataCallback done) override {
    target_->CallMetadata(request, std::move(done));
  }
  std::string Describe() const override { return target_->Describe(); }

 private:
  protocol::PageChannel* target_;
};

}  // namespace

StatusOr<std::unique_ptr<PageFetcher>> MakePageFetcher(const ClientOptions& options) {
  if (options.page_size == 0 || options.page_size > protocol::kMaxPageSize ||
      options.page_size % kPageSizeUnit != 0) {
    return InvalidArgumentError("page size must be a multiple of 64 KiB up to 16 MiB");
  }
  std::vector<placement::WorkerNode> nodes;
  ChannelFactory factory;
  if (options.local_channel != nullptr) {
    nodes.push_back({"local", "in-process", 1.0});
    protocol::PageChannel* local = options.local_channel;
    factory = [local](const placement::WorkerNode&) {
      return std::make_unique<BorrowedChannel>(local);
    };
  } else {
    for (const std::string& address : options.workers) {
      for (const placement::WorkerNode& n : nodes) {
        if (n.id == address) return InvalidArgumentError("worker " + address + " is listed twice");
      }
      nodes.push_back({address, address, 1.0});
    }
    transport::RemoteChannelOptions ro;
    ro.connections = options.connections_per_worker;
    ro.page_size = options.page_size;
    ro.request_timeout = options.worker_timeout;
    ro.short_circuit = options.short_circuit;
    ro.token = options.token;
    ro.connect_timeout = std::min<std::chrono::milliseconds>(options.worker_timeout,
                                                             std::chrono::milliseconds(1000));
    if (options.tls.enabled()) {
      tls::TlsOptions t;
      t.ca_file = options.tls.ca_file;
      t.cert_file = options.tls.cert_file;
      t.key_file = options.tls.key_file;
      CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<tls::TlsContext> ctx,
                             tls::TlsContext::Create(tls::TlsContext::Role::kClient, t));
      // A TLS handshake is two round trips more than a TCP connect.
      ro.connect_timeout = std::max(ro.connect_timeout, std::chrono::milliseconds(2000));
      ro.connect = [ctx](const std::string& address, std::chrono::milliseconds timeout) {
        return tls::Dial(ctx.get(), address, timeout);
      };
    }
    factory = [ro](const placement::WorkerNode& node) mutable {
      ro.address = node.address;
      return std::make_unique<transport::RemoteChannel>(ro);
    };
  }
  auto fetcher = std::make_unique<PageFetcher>(options.page_size, std::move(factory),
                                               /*max_worker_attempts=*/2);
  fetcher->set_no_cache(options.no_cache);
  CAIRN_RETURN_IF_ERROR(fetcher->SetWorkers(std::move(nodes)));
  return fetcher;
}

ClientImpl::ClientImpl(const ClientOptions& options,
                       std::shared_ptr<const mount::MountTable> mounts,
                       std::unique_ptr<PageFetcher> fetcher, Clock* clock)
    : options_(options),
      clock_(clock != nullptr ? clock : Clock::Real()),
      mounts_(std::move(mounts)),
      metadata_(clock, kMaxMetadataEntries),
      fetcher_(std::move(fetcher)),
      buffer_(options.buffer_bytes, options.page_size),
      prefetch_pool_(std::make_unique<ThreadPool>(16, "readahead")) {}

ClientImpl::~ClientImpl() {
  feed_.reset();
  prefetch_pool_.reset();
}

std::shared_ptr<const mount::MountTable> ClientImpl::Mounts() const {
  MutexLock l(&mu_);
  return mounts_;
}

Status ClientImpl::SetMounts(std::vector<MountSpec> specs) {
  CAIRN_ASSIGN_OR_RETURN(auto table, mount::MountTable::Create(std::move(specs)));
  {
    MutexLock l(&mu_);
    mounts_ = std::move(table);
  }
  // A mount that moved or changed source must not answer from the old one's metadata.
  metadata_.Invalidate("/");
  mount_table_updates_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ClientImpl::SetWorkers(std::vector<placement::WorkerNode> nodes) {
  return fetcher_->SetWorkers(std::move(nodes));
}

void ClientImpl::AttachFeed(std::unique_ptr<ClusterFeed> feed) { feed_ = std::move(feed); }

StatusOr<FileInfo> ClientImpl::Stat(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  std::shared_ptr<const mount::MountTable> mounts = Mounts();
  CAIRN_ASSIGN_OR_RETURN(mount::Resolved r, mounts->Resolve(path));
  std::string name = path == "/" ? "" : BaseName(path);
  if (r.mount == nullptr || r.key.empty()) return DirInfo(name);
  if (auto cached = metadata_.GetStat(path)) {
    metadata_hits_.fetch_add(1, std::memory_order_relaxed);
    return *cached;
  }
  metadata_misses_.fetch_add(1, std::memory_order_relaxed);
  if (auto listed = StatFromParentListing(*r.mount, r.key, path)) return *listed;
  StatusOr<FileInfo> info = StatPath(*r.mount, r.key, path, name);
  if (info.ok() || info.status().code() == StatusCode::kNotFound) {
    metadata_.PutStat(path, info, r.mount->spec.metadata_ttl.count());
  }
  return info;
}

std::optional<StatusOr<FileInfo>> ClientImpl::StatFromParentListing(const mount::Mount& mount,
                                                                    const std::string& key,
                                                                    const std::string& path) {
  size_t slash = key.rfind('/');
  std::string parent_key = slash == std::string::npos ? "" : key.substr(0, slash);
  std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  std::string parent_path = path.substr(0, path.rfind('/'));
  if (parent_path.empty()) parent_path = "/";
  // A write-back mount's file may be pending at its owner, which is not the listing's (the
  // directory's) owner: only a stat of the file itself finds it.
  if (mount.spec.write_back) return std::nullopt;
  // At most one LIST per page of the directory and TTL: the pages stay cached with the
  // listings, and a name is looked for page after page (sorted names), up to
  // kMaxListingPagesPerStat pages: a DataLoader worker's stats of a 6,000-file folder cost 6
  // LISTs, not 6,000 HEADs.
  std::string token;
  std::optional<DirPage> page;
  // Whether every page walked was listed by this call: its "absent" is then as fresh as a HEAD's.
  bool listed_now = true;
  for (int walked = 0;; ++walked) {
    if (walked == kMaxListingPagesPerStat) return std::nullopt;  // A huge folder: HEAD it.
    page = metadata_.GetList(parent_path, token);
    if (page) {
      listed_now = false;
    } else {
      auto listed = ListPageOnce(mount, parent_key, parent_path, token);
      if (!listed.ok()) return std::nullopt;  // The HEAD path reports errors precisely.
      page = std::move(listed).value();
    }
    auto it = std::lower_bound(page->entries.begin(), page->entries.end(), name,
                               [](const FileInfo& e, const std::string& n) { return e.name < n; });
    if (it != page->entries.end() && it->name == name) return StatusOr<FileInfo>(*it);
    if (page->next_token.empty()) break;  // The whole directory was seen.
    // Past this page's last name: the next page. Otherwise the name would be here; a source's
    // order can still put a directory ("a", from "a/") after a key ("a-b") of an earlier page,
    // so only the HEAD path can say it is absent.
    if (page->entries.empty() || page->entries.back().name >= name) return std::nullopt;
    token = page->next_token;
  }
  // A worker's listing shows only what this client's grants allow: a name missing from it may
  // be hidden rather than absent, and the worker's own answer for it says which.
  if (MetadataViaWorkers(mount)) return std::nullopt;
  // The whole directory is on the page and the name is not.
  StatusOr<FileInfo> missing = NotFoundError("no such file or directory: " + key);
  metadata_.PutStat(
      path, missing, mount.spec.metadata_ttl.count(),
      listed_now ? MetadataCache::StatOrigin::kAsked : MetadataCache::StatOrigin::kDerived);
  return missing;
}

namespace {

// No worker could answer a metadata request (none known, all down, one that does not answer
// them): a client that may read the source itself does so.
bool NoWorkerAnswered(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kUnimplemented;
}

// Whether a failed name change (rename, remove) may have changed what the source or a worker
// holds: anything but a request no worker got.
bool ChangeMayHaveHappened(const Status& s) {
  return s.code() != StatusCode::kUnavailable || s.outcome_unknown();
}

}  // namespace

StatusOr<FileInfo> ClientImpl::StatPath(const mount::Mount& mount, const std::string& key,
                                        const std::string& path, const std::string& name) {
  if (MetadataViaWorkers(mount)) {
    StatusOr<FileInfo> info = StatFromWorkers(path, name);
    if (WorkersOwnMetadata() || !NoWorkerAnswered(info.status())) return info;
  }
  return StatFromSource(mount, key, name);
}

StatusOr<DirPage> ClientImpl::ListPage(const mount::Mount& mount, const std::string& key,
                                       const std::string& path, std::string_view token,
                                       int max_entries) {
  std::optional<StatusOr<DirPage>> page;
  if (MetadataViaWorkers(mount)) {
    page = ListFromWorkers(path, token, max_entries);
    if (!WorkersOwnMetadata() && NoWorkerAnswered(page->status())) page.reset();
  }
  if (!page) page = ListFromSource(mount, key, token, max_entries);
  if (page->ok()) RememberListing(mount, path, token, **page);
  return std::move(*page);
}

StatusOr<DirPage> ClientImpl::ListPageOnce(const mount::Mount& mount, const std::string& key,
                                           const std::string& path, const std::string& token) {
  std::string flight_key = path;
  flight_key += '\0';
  flight_key += token;
  std::promise<StatusOr<DirPage>> mine;
  std::shared_future<StatusOr<DirPage>> theirs;
  {
    MutexLock l(&listings_mu_);
    auto [it, leader] = listings_.try_emplace(flight_key);
    if (leader) {
      it->second = mine.get_future().share();
    } else {
      theirs = it->second;
    }
  }
  if (theirs.valid()) return theirs.get();  // A copy of the leader's answer.
  // A leader that finished between this caller's cache miss and now cached the page first.
  std::optional<DirPage> cached = metadata_.GetList(path, token);
  StatusOr<DirPage> page =
      cached ? StatusOr<DirPage>(std::move(*cached)) : ListPage(mount, key, path, token, 1000);
  {
    MutexLock l(&listings_mu_);
    listings_.erase(flight_key);  // Later misses list again (the page is cached if it is OK).
  }
  mine.set_value(page);
  return page;
}

StatusOr<FileInfo> ClientImpl::StatFromWorkers(const std::string& path, const std::string& name) {
  protocol::StatPathRequest request;
  request.path = path;
  CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply, fetcher_->Metadata(request));
  if (reply.entries.size() != 1) {
    return UnavailableError("a worker answered a stat of " + path + " with " +
                            std::to_string(reply.entries.size()) + " entries");
  }
  protocol::DirEntry& e = reply.entries[0];
  return ToFileInfo({name, e.is_dir, e.size, std::move(e.version), e.mtime_ns});
}

StatusOr<DirPage> ClientImpl::ListFromWorkers(const std::string& path, std::string_view token,
                                              int max_entries) {
  protocol::ListDirRequest request;
  request.path = path;
  request.token = std::string(token);
  request.max_entries = static_cast<uint32_t>(
      std::clamp<int>(max_entries, 1, static_cast<int>(protocol::kMaxListEntries)));
  CAIRN_ASSIGN_OR_RETURN(protocol::MetadataReply reply, fetcher_->Metadata(request));
  std::vector<mount::Entry> entries;
  for (protocol::DirEntry& e : reply.entries) {
    if (e.name.empty()) continue;  // Not a name (the decoder refused '/', '.', '..', NUL).
    entries.push_back({std::move(e.name), e.is_dir, e.size, std::move(e.version), e.mtime_ns});
  }
  // Whatever the worker sent.
  mount::SortUniqueByName(entries);
  DirPage page;
  page.next_token = std::move(reply.next_token);
  for (mount::Entry& e : entries) page.entries.push_back(ToFileInfo(std::move(e)));
  return page;
}

StatusOr<FileInfo> ClientImpl::StatFromSource(const mount::Mount& mount, const std::string& key,
                                              const std::string& name) {
  CAIRN_ASSIGN_OR_RETURN(mount::Entry entry, mount::StatKey(mount, key, name));
  return ToFileInfo(std::move(entry));
}

StatusOr<DirPage> ClientImpl::ListDir(std::string_view raw_path, std::string_view token,
                                      int max_entries) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  std::shared_ptr<const mount::MountTable> mounts = Mounts();
  CAIRN_ASSIGN_OR_RETURN(mount::Resolved r, mounts->Resolve(path));
  if (r.mount == nullptr) {
    DirPage page;
    for (std::string& child : mounts->VirtualChildren(path)) {
      page.entries.push_back(DirInfo(std::move(child)));
    }
    return page;
  }
  if (!r.key.empty()) {
    CAIRN_ASSIGN_OR_RETURN(FileInfo self, Stat(path));
    if (!self.is_dir) return InvalidArgumentError(path + " is not a directory");
  }
  if (auto cached = metadata_.GetList(path, token)) {
    metadata_hits_.fetch_add(1, std::memory_order_relaxed);
    return *cached;
  }
  metadata_misses_.fetch_add(1, std::memory_order_relaxed);
  return ListPage(*r.mount, r.key, path, token, max_entries);
}

StatusOr<DirPage> ClientImpl::ListFromSource(const mount::Mount& mount, const std::string& key,
                                             std::string_view token, int max_entries) {
  CAIRN_ASSIGN_OR_RETURN(mount::Listing listed,
                         mount::ListDirectory(mount, key, std::string(token), max_entries));
  DirPage page;
  page.next_token = std::move(listed.next_token);
  for (mount::Entry& entry : listed.entries) page.entries.push_back(ToFileInfo(std::move(entry)));
  return page;
}

void ClientImpl::RememberListing(const mount::Mount& mount, const std::string& path,
                                 std::string_view token, const DirPage& page) {
  const int64_t ttl_us = mount.spec.metadata_ttl.count();
  // Listing results answer the stats that usually follow (ls -l, readdirplus, DataLoader);
  // not on a write-back mount, whose files may be pending at owners the listing did not ask.
  if (!mount.spec.write_back) {
    for (const FileInfo& info : page.entries) {
      metadata_.PutStat(JoinPath(path, info.name), info, ttl_us,
                        MetadataCache::StatOrigin::kDerived);
    }
  }
  metadata_.PutList(path, token, page, ttl_us);
}

StatusOr<ObjectRef> ClientImpl::ObjectRefFor(const std::string& path, FileInfo info) {
  if (info.is_dir) return InvalidArgumentError(path + " is a directory");
  std::shared_ptr<const mount::MountTable> mounts = Mounts();
  CAIRN_ASSIGN_OR_RETURN(mount::Resolved r, mounts->Resolve(path));
  if (r.mount == nullptr) return InvalidArgumentError(path + " is a directory");
  ObjectRef object;
  object.table = std::move(mounts);
  object.mount = r.mount;
  object.key = r.key;
  object.object_id = r.mount->ObjectId(r.key);
  object.info = std::move(info);
  return object;
}

CacheOpsContext ClientImpl::OpsContext() {
  return CacheOpsContext{
      this, fetcher_.get(),
      [this](const std::string& path, const FileInfo& info) { return ObjectRefFor(path, info); }};
}

StatusOr<LoadProgress> ClientImpl::Load(std::string_view path, const LoadOptions& options,
                                        const std::function<void(const LoadProgress&)>& progress) {
  return RunLoad(OpsContext(), path, options, progress);
}

StatusOr<FreeResult> ClientImpl::Free(std::string_view path) { return RunFree(OpsContext(), path); }

Status ClientImpl::Invalidate(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  metadata_.Invalidate(path);
  if (feed_ != nullptr) return feed_->PublishInvalidation(path);
  return Status::Ok();
}

StatusOr<std::unique_ptr<FileReader>> ClientImpl::Open(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_ASSIGN_OR_RETURN(FileInfo info, Stat(path));
  CAIRN_ASSIGN_OR_RETURN(ObjectRef object, ObjectRefFor(path, std::move(info)));
  ReadContext ctx{fetcher_.get(),
                  &buffer_,
                  prefetch_pool_.get(),
                  options_.max_readahead_pages,
                  &buffer_hits_,
                  &unbuffered_reads_,
                  options_.unbuffered_small_files};
  return std::unique_ptr<FileReader>(new FileReaderImpl(std::move(object), ctx));
}

Status ClientImpl::NoWriter(const std::string& path) {
  return UnavailableError("cannot write " + path +
                          ": writes go through the workers, and this client knows none (give "
                          "--worker or --etcd)");
}

StatusOr<std::shared_ptr<const mount::Mount>> ClientImpl::WritableMount(const std::string& path) {
  std::shared_ptr<const mount::MountTable> mounts = Mounts();
  CAIRN_ASSIGN_OR_RETURN(mount::Resolved resolved, mounts->Resolve(path));
  if (resolved.mount == nullptr || resolved.key.empty()) {
    return InvalidArgumentError(path + " is a directory");
  }
  if (resolved.mount->spec.read_only) {
    return FailedPreconditionError("mount " + resolved.mount->spec.path + " is read-only");
  }
  return std::shared_ptr<const mount::Mount>(mounts, resolved.mount);
}

void ClientImpl::ForgetWritten(const std::string& path) {
  metadata_.Invalidate(path);  // Also drops the parent's cached listing pages.
}

std::optional<int64_t> ClientImpl::SourceListingTtl(const std::string& path) {
  std::shared_ptr<const mount::MountTable> mounts = Mounts();
  StatusOr<mount::Resolved> r = mounts->Resolve(path);
  if (!r.ok() || r->mount == nullptr || r->key.empty()) return std::nullopt;
  // A write-back mount's listings miss files pending at other owners, and a worker's listing
  // is filtered by the caller's grants: both are dropped rather than patched.
  if (r->mount->spec.write_back || MetadataViaWorkers(*r->mount)) return std::nullopt;
  return r->mount->spec.metadata_ttl.count();
}

void ClientImpl::NoteCommitted(const std::string& path, const FileInfo& info) {
  // A version is what this client's own stat would now find (write-through: the object in the
  // source); a write-back close has none yet.
  std::optional<int64_t> ttl_us = SourceListingTtl(path);
  if (!ttl_us || info.version.empty()) return ForgetWritten(path);
  metadata_.NoteCommitted(path, info, *ttl_us);
}

void ClientImpl::NoteRemoved(const std::string& path) {
  std::optional<int64_t> ttl_us = SourceListingTtl(path);
  if (!ttl_us) return ForgetWritten(path);
  metadata_.NoteRemoved(path, *ttl_us);
}

bool ClientImpl::Writable(std::string_view raw_path) {
  StatusOr<std::string> path = mount::NormalizePath(raw_path);
  if (!path.ok()) return false;
  StatusOr<mount::Resolved> resolved = Mounts()->Resolve(*path);
  return resolved.ok() && resolved->mount != nullptr && !resolved->mount->spec.read_only;
}

StatusOr<std::unique_ptr<FileWriter>> ClientImpl::OpenForWrite(std::string_view raw_path,
                                                               const WriteOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<const mount::Mount> mount, WritableMount(path));
  if (options.exclusive && !options.create) {
    return InvalidArgumentError("an exclusive open must create");
  }
  protocol::OpenWriteRequest request;
  request.path = path;
  request.create = options.create;
  request.exclusive = options.exclusive;
  request.truncate = options.truncate;
  // A create right after a lookup that found nothing (the kernel looks a name up before it
  // creates it) spares the worker asking the source again. Not one that keeps the content:
  // if the name was made since, its content is what the open goes on from (an append).
  request.seen_absent = options.create && options.truncate && !options.exclusive &&
                        metadata_.FreshlyAbsent(path, kSeenAbsentMaxAgeUs);
  // An open that keeps the content makes the worker read the whole object first.
  request.deadline_ms = static_cast<uint32_t>(
      (options.truncate ? options_.worker_timeout : options_.write_commit_timeout).count());
  // An open that keeps the content of a write-back file goes to its owner only: the file may
  // wait there, newer than the source's, and another worker would start from the source's. So
  // does an exclusive create, which the files waiting there may refuse (another worker would
  // let two clients create the name).
  const bool owner_only = mount->spec.write_back && (!options.truncate || options.exclusive);
  CAIRN_ASSIGN_OR_RETURN(
      OwnerReply opened,
      OpenOnOwner(request, owner_only ? FailOver::kNever : FailOver::kWhenUnanswered));
  FileWriterOptions wo;
  wo.commit_timeout = options_.write_commit_timeout;
  wo.room_wait = options_.write_room_wait;
  wo.on_commit = [this](const std::string& p, const FileInfo& info) { NoteCommitted(p, info); };
  wo.keeper = write_keeper_;
  wo.idle_timeout = std::chrono::milliseconds(opened.reply.idle_timeout_ms);
  // What is cached of the path itself is stale now; the parent's listing is not (the source
  // holds what it held until the commit).
  if (options.truncate) metadata_.Forget(path);
  return std::unique_ptr<FileWriter>(new RemoteFileWriter(
      std::move(opened.channel), path, opened.reply.handle, opened.reply.size, std::move(wo)));
}

StatusOr<ClientImpl::OwnerReply> ClientImpl::OpenOnOwner(const protocol::OpenWriteRequest& request,
                                                         FailOver fail_over) {
  RoomWait room_wait(options_.write_room_wait);
  for (;;) {
    StatusOr<OwnerReply> opened = AskOwners(request.path, request, fail_over);
    // Only an open that keeps the content takes room in the budget; a refusal of any other, and
    // the worker's cap on files open for writing, are not waited out here (the closes that
    // would lift the cap may be queued behind this very open, in the same FUSE threads).
    if (opened.ok() || opened.status().code() != StatusCode::kResourceExhausted ||
        request.truncate || opened.status().reason() == StatusReason::kTooManyOpenFiles) {
      return opened;
    }
    const bool first = !room_wait.waited();
    std::optional<int64_t> again = room_wait.Refused(clock_->NowMicros());
    if (!again) {
      return opened.status().WithContext("open of " + request.path + " (" + room_wait.GaveUp() +
                                         ")");
    }
    if (first) {
      spdlog::info("no room to open {} on its worker ({}); trying again for up to {}", request.path,
                   opened.status().message(), RoomWait::Describe(options_.write_room_wait));
    }
    clock_->SleepForMicros(*again - clock_->NowMicros());
  }
}

StatusOr<ClientImpl::OwnerReply> ClientImpl::AskFirstOwner(
    std::shared_ptr<protocol::PageChannel> owner, const protocol::WriteRequest& request) {
  protocol::PageChannel& channel = *owner;
  constexpr int kSends = 5;  // Backoffs 0.25, 0.5, 1, 2 s: past a suspect worker's second.
  for (int sent = 1;; ++sent) {
    StatusOr<protocol::WriteReply> reply = protocol::CallWriteAndWait(channel, request);
    if (reply.ok()) return OwnerReply{std::move(owner), std::move(reply).value()};
    if (!reply.status().not_sent()) return reply.status();  // Its answer, or lost on the way.
    if (sent >= kSends) {
      return reply.status().WithContext(
          "the path's owner holds its files waiting for upload; no other worker can answer");
    }
    clock_->SleepForMicros(std::min<int64_t>(2'000'000, int64_t{250'000} << (sent - 1)));
  }
}

StatusOr<ClientImpl::OwnerReply> ClientImpl::AskOwners(const std::string& path,
                                                       const protocol::WriteRequest& request,
                                                       FailOver fail_over) {
  const auto owners = fetcher_->OwnersOf(path);
  if (owners.empty()) return NoWriter(path);
  if (fail_over == FailOver::kNever) return AskFirstOwner(owners.front(), request);
  Status last;
  for (const auto& channel : owners) {
    StatusOr<protocol::WriteReply> reply = protocol::CallWriteAndWait(*channel, request);
    if (reply.ok()) return OwnerReply{channel, std::move(reply).value()};
    const StatusCode code = reply.status().code();
    if (code != StatusCode::kUnavailable && code != StatusCode::kDeadlineExceeded) {
      return reply.status();
    }
    if (fail_over == FailOver::kWhenNotSent &&
        (reply.status().outcome_unknown() || code == StatusCode::kDeadlineExceeded)) {
      return reply.status()
          .WithContext("worker " + channel->Describe() +
                       " got the request and gave no answer (it may have been done)")
          .WithOutcomeUnknown();
    }
    last = reply.status();
  }
  return UnavailableError("no worker could write " + path + ": " + last.message());
}

Status ClientImpl::Remove(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<const mount::Mount> mount, WritableMount(path));
  protocol::RemovePathRequest request;
  request.deadline_ms = static_cast<uint32_t>(options_.worker_timeout.count());
  request.path = path;
  Status removed = AskOwners(path, request, NameChange(*mount)).status();
  if (removed.ok()) {
    NoteRemoved(path);
  } else if (ChangeMayHaveHappened(removed)) {
    ForgetWritten(path);
  }
  return removed;
}

Status ClientImpl::RemoveDir(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<const mount::Mount> mount, WritableMount(path));
  protocol::RemovePathRequest request;
  request.deadline_ms = static_cast<uint32_t>(options_.worker_timeout.count());
  request.path = path;
  request.directory = true;
  Status removed = AskOwners(path, request, NameChange(*mount)).status();
  if (ChangeMayHaveHappened(removed)) ForgetWritten(path);
  return removed;
}

Status ClientImpl::MakeDir(std::string_view raw_path) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  CAIRN_RETURN_IF_ERROR(WritableMount(path).status());
  protocol::MakeDirRequest request;
  request.deadline_ms = static_cast<uint32_t>(options_.worker_timeout.count());
  request.path = path;
  Status made = AskOwners(path, request).status();
  if (made.code() != StatusCode::kUnavailable) ForgetWritten(path);
  return made;
}

// Sent to the owner of `to`, the name that becomes visible (as a write of `to` would be).
Status ClientImpl::Rename(std::string_view raw_from, std::string_view raw_to, bool no_replace) {
  CAIRN_ASSIGN_OR_RETURN(std::string from, mount::NormalizePath(raw_from));
  CAIRN_ASSIGN_OR_RETURN(std::string to, mount::NormalizePath(raw_to));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<const mount::Mount> from_mount, WritableMount(from));
  CAIRN_RETURN_IF_ERROR(WritableMount(to).status());
  const auto from_owners = fetcher_->OwnersOf(from);
  const auto to_owners = fetcher_->OwnersOf(to);
  const bool one_owner =
      !from_owners.empty() && !to_owners.empty() && from_owners[0] == to_owners[0];
  if (from_mount->spec.write_back && !one_owner) {
    // A closed file of `from` still waiting for its upload on the worker that owns `from` goes
    // to the owner of `to` from there, as if written under `to` (HandOver). NotFound: that
    // worker holds none (now), so the source renames what it holds, below. (When one worker
    // owns both names, the Rename moves such a file itself: decision 8 of docs/write-path.md.)
    protocol::HandOverRequest hand_over;
    hand_over.deadline_ms = static_cast<uint32_t>(options_.write_commit_timeout.count());
    hand_over.from = from;
    hand_over.to = to;
    hand_over.no_replace = no_replace;
    Status passed = AskOwners(from, hand_over, FailOver::kNever).status();
    if (passed.code() != StatusCode::kNotFound) {
      if (ChangeMayHaveHappened(passed)) {
        ForgetWritten(from);
        ForgetWritten(to);
      }
      return passed.WithContext("rename of " + from);
    }
  }
  protocol::RenameRequest request;
  // A server-side copy of a large object takes a while: the write commit's deadline.
  request.deadline_ms = static_cast<uint32_t>(options_.write_commit_timeout.count());
  request.from = from;
  request.to = to;
  request.no_replace = no_replace;
  Status moved = AskOwners(to, request, NameChange(*from_mount)).status();
  if (ChangeMayHaveHappened(moved)) {
    ForgetWritten(from);
    ForgetWritten(to);
  }
  return moved;
}

Status ClientImpl::SyncWrites(std::string_view raw_path, std::chrono::milliseconds timeout) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, mount::NormalizePath(raw_path));
  const auto workers = fetcher_->AllWorkers();
  if (workers.empty()) return UnavailableError("no worker is known: nothing can be synced");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& [id, channel] : workers) {
    // Each worker waits for its own files; the later ones have had the time the earlier took.
    // A worker answers one request within 10 minutes: a longer wait takes several.
    constexpr int64_t kPerRequestMs = 10 * 60 * 1000;
    for (;;) {
      const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(
                               deadline - std::chrono::steady_clock::now())
                               .count();
      protocol::SyncPathRequest request;
      request.path = path;
      request.deadline_ms = static_cast<uint32_t>(std::clamp<int64_t>(left, 1, kPerRequestMs));
      Status st = protocol::CallWriteAndWait(*channel, request).status();
      if (st.ok()) break;
      if (st.code() == StatusCode::kDeadlineExceeded && left > kPerRequestMs) continue;
      return st.WithContext("worker " + id);
    }
  }
  return Status::Ok();
}

std::shared_ptr<const MetadataSeed> ClientImpl::ExportMetadata() {
  return metadata_.Export(kMaxSeedEntries);
}

void ClientImpl::SeedMetadata(const MetadataSeed& seed) { metadata_.Import(seed); }

void ClientImpl::InvalidateMetadata(std::string_view raw_path) {
  auto path = mount::NormalizePath(raw_path);
  if (path.ok()) metadata_.Invalidate(*path);
}

ClientStats ClientImpl::Stats() const {
  ClientStats s;
  FetcherCounters& c = fetcher_->counters();
  s.page_reads = c.page_reads.load();
  s.page_read_failures = c.page_read_failures.load();
  s.fallback_bytes = c.fallback_bytes.load();
  s.checksum_failures = c.checksum_failures.load();
  s.short_circuit_reads = c.short_circuit_reads.load();
  s.buffer_hits = buffer_hits_.load();
  s.unbuffered_reads = unbuffered_reads_.load();
  s.metadata_hits = metadata_hits_.load();
  s.metadata_misses = metadata_misses_.load();
  s.ring_updates = c.ring_updates.load();
  s.mount_table_updates = mount_table_updates_.load();
  s.workers = fetcher_->workers().size();
  s.etcd_connected = feed_ != nullptr && feed_->connected();
  return s;
}

}  // namespace cairn::client

namespace cairn {

StatusOr<std::unique_ptr<Client>> Client::Create(const ClientOptions& options) {
  if (!options.etcd_endpoints.empty() &&
      (!options.mounts.empty() || !options.workers.empty() || options.local_channel != nullptr)) {
    return InvalidArgumentError(
        "with etcd, mounts and workers come from etcd: do not also list them");
  }
  CAIRN_ASSIGN_OR_RETURN(auto mounts, mount::MountTable::Create(options.mounts));
  CAIRN_ASSIGN_OR_RETURN(auto fetcher, client::MakePageFetcher(options));
  auto client = std::make_unique<client::ClientImpl>(options, std::move(mounts), std::move(fetcher),
                                                     Clock::Real());
  if (!options.etcd_endpoints.empty()) {
    CAIRN_ASSIGN_OR_RETURN(auto feed,
                           client::ClusterFeed::Start(options.etcd_endpoints, options.etcd_tls,
                                                      options.etcd_insecure_plaintext, client.get(),
                                                      options.etcd_first_sync_timeout));
    client->AttachFeed(std::move(feed));
  }
  // After the first mount table (cluster mode): taking it drops whatever was cached.
  if (options.metadata_seed) client->SeedMetadata(*options.metadata_seed);
  return std::unique_ptr<Client>(std::move(client));
}

}  // namespace cairn
