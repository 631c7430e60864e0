#include "write/journal.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/file_util.h"
#include "common/checksum.h"
#include "common/crash_point.h"
#include "ufs/part_layout.h"

namespace cairn::write {

namespace {

constexpr char kMagic[8] = {'C', 'A', 'I', 'R', 'N', 'W', 'J', '1'};
constexpr size_t kFrameHeader = 4 + 8;  // Payload length, checksum of length and payload.
constexpr uint64_t kMaxJournalBytes = 1ull << 30;  // Replay reads the file into memory.

void PutU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // Little-endian hosts only (docs/write-journal.md).
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out->append(b, 8);
}
void PutString(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads fields from an untrusted payload: every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool U8(uint8_t* v) { return Raw(v, 1); }
  bool U32(uint32_t* v) { return Raw(v, 4); }
  bool U64(uint64_t* v) { return Raw(v, 8); }
  bool String(std::string* s) {
    uint32_t n = 0;
    if (!U32(&n) || n > data_.size() - pos_) return false;
    s->assign(data_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  bool Raw(void* v, size_t n) {
    if (n > data_.size() - pos_) return false;
    std::memcpy(v, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

uint64_t FrameChecksum(std::string_view length_and_payload) {
  return Checksum64(std::span<const char>(length_and_payload.data(), length_and_payload.size()));
}

std::string Frame(const JournalRecord& record) {
  return FrameJournalPayload(EncodeJournalRecord(record));
}

Status WriteFully(int fd, std::string_view data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, what);
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadAll(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoToStatus(errno, "stat " + path);
  if (static_cast<uint64_t>(st.st_size) > kMaxJournalBytes) {
    return CorruptionError("write-back journal " + path + " is larger than 1 GiB");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "read " + path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

// A journal whose creation never finished: shorter than the magic, holding a prefix of it (the
// rest lost) or zeros (a file system may show unwritten blocks so), or only its magic's
// first bytes followed by zeros. Never a journal that holds a record: its magic was durable
// before the first record was written, and a damaged magic of a whole journal is refused.
bool IsTornStart(std::string_view data) {
  if (data.size() > sizeof(kMagic)) return false;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != kMagic[i] && data[i] != 0) return false;
  }
  return data.size() < sizeof(kMagic) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0;
}

}  // namespace

namespace {

// The type byte of a pending record that carries its spool file's digest (format 1, added
// with digests: a worker from before refuses a journal that has one rather than upload
// unchecked... or misread it).
constexpr uint8_t kPendingWithDigest = 5;

}  // namespace

std::string FrameJournalPayload(std::string_view payload) {
  std::string covered;  // The checksum covers the length and the payload.
  PutU32(&covered, static_cast<uint32_t>(payload.size()));
  covered.append(payload);
  std::string frame = covered.substr(0, 4);
  PutU64(&frame, FrameChecksum(covered));
  frame.append(payload);
  return frame;
}

std::string EncodeJournalRecord(const JournalRecord& r) {
  std::string out;
  const bool with_digest = r.type == JournalRecord::Type::kPending && r.digest_part_size != 0;
  PutU8(&out, with_digest ? kPendingWithDigest : static_cast<uint8_t>(r.type));
  PutU64(&out, r.id);
  if (r.type == JournalRecord::Type::kPending) {
    PutString(&out, r.path);
    PutString(&out, r.principal);
    PutString(&out, r.spool_path);
    PutU64(&out, r.size);
    PutU8(&out, static_cast<uint8_t>(r.condition.kind));
    PutString(&out, r.condition.version);
    PutU64(&out, static_cast<uint64_t>(r.closed_at_ms));
    if (with_digest) {
      PutU64(&out, r.digest_part_size);
      PutU64(&out, r.digest);
    }
  } else if (r.type == JournalRecord::Type::kUpload) {
    PutString(&out, r.path);
    PutString(&out, r.detail);
  } else if (r.type == JournalRecord::Type::kRenamed) {
    PutString(&out, r.path);
    PutU8(&out, static_cast<uint8_t>(r.condition.kind));
    PutString(&out, r.condition.version);
  } else if (r.type == JournalRecord::Type::kSpoolSet) {
    // The id is the set: nothing follows.
  } else {
    PutU8(&out, static_cast<uint8_t>(r.outcome));
    PutString(&out, r.detail);
  }
  return out;
}

StatusOr<JournalRecord> DecodeJournalRecord(std::string_view payload) {
  Reader in(payload);
  JournalRecord r;
  uint8_t type = 0;
  if (!in.U8(&type) || !in.U64(&r.id)) return CorruptionError("journal record too short");
  if (r.id == 0) return CorruptionError("journal record with id 0");
  if (type == static_cast<uint8_t>(JournalRecord::Type::kPending) || type == kPendingWithDigest) {
    r.type = JournalRecord::Type::kPending;
    uint8_t kind = 0;
    uint64_t closed_at = 0;
    if (!in.String(&r.path) || !in.String(&r.principal) || !in.String(&r.spool_path) ||
        !in.U64(&r.size) || !in.U8(&kind) || !in.String(&r.condition.version) ||
        !in.U64(&closed_at)) {
      return CorruptionError("pending journal record too short");
    }
    if (type == kPendingWithDigest &&
        (!in.U64(&r.digest_part_size) || !in.U64(&r.digest) || r.digest_part_size == 0 ||
         r.digest_part_size > ufs::PartLayout::kMaxBase)) {
      return CorruptionError("pending journal record with a bad digest");
    }
    // No file is larger (nor, summed over the records, near 2^64): a size past it is damage.
    if (r.size > JournalRecord::kMaxFileBytes) {
      return CorruptionError("pending journal record of " + std::to_string(r.size) + " bytes");
    }
    if (kind > static_cast<uint8_t>(ufs::WriteCondition::Kind::kVersion)) {
      return CorruptionError("journal record with an unknown condition");
    }
    if (r.path.empty() || r.path[0] != '/' || r.spool_path.empty()) {
      return CorruptionError("pending journal record without a path or spool file");
    }
    r.condition.kind = static_cast<ufs::WriteCondition::Kind>(kind);
    r.closed_at_ms = static_cast<int64_t>(closed_at);
  } else if (type == static_cast<uint8_t>(JournalRecord::Type::kUpload)) {
    r.type = JournalRecord::Type::kUpload;
    if (!in.String(&r.path) || !in.String(&r.detail)) {
      return CorruptionError("upload journal record too short");
    }
    if (r.path.empty() || r.path[0] != '/' || r.detail.empty()) {
      return CorruptionError("upload journal record without a path or token");
    }
  } else if (type == static_cast<uint8_t>(JournalRecord::Type::kRenamed)) {
    r.type = JournalRecord::Type::kRenamed;
    uint8_t kind = 0;
    if (!in.String(&r.path) || !in.U8(&kind) || !in.String(&r.condition.version)) {
      return CorruptionError("renamed journal record too short");
    }
    if (kind > static_cast<uint8_t>(ufs::WriteCondition::Kind::kVersion)) {
      return CorruptionError("journal record with an unknown condition");
    }
    if (r.path.empty() || r.path[0] != '/') {
      return CorruptionError("renamed journal record without a path");
    }
    r.condition.kind = static_cast<ufs::WriteCondition::Kind>(kind);
  } else if (type == static_cast<uint8_t>(JournalRecord::Type::kSpoolSet)) {
    r.type = JournalRecord::Type::kSpoolSet;
  } else if (type == static_cast<uint8_t>(JournalRecord::Type::kDone)) {
    r.type = JournalRecord::Type::kDone;
    uint8_t outcome = 0;
    if (!in.U8(&outcome) || !in.String(&r.detail)) {
      return CorruptionError("done journal record too short");
    }
    if (outcome < 1 || outcome > static_cast<uint8_t>(JournalRecord::Outcome::kEnded)) {
      return CorruptionError("journal record with an unknown outcome");
    }
    r.outcome = static_cast<JournalRecord::Outcome>(outcome);
  } else {
    return CorruptionError("journal record of unknown type " + std::to_string(type));
  }
  if (!in.AtEnd()) return CorruptionError("journal record with trailing bytes");
  return r;
}

namespace {

// Applies a kRenamed record to the live records. With another path it is a rename of a file not
// yet uploaded (WriteBack::Retarget), which replaces the other pending files of both names (the
// older files of the old name, the files of the new one): they go with it, here, so that neither
// a crash before their own kDone records nor a compaction in between brings them back (replayed,
// a replaced file of the new name would land after the renamed one and undo the rename). With the
// same path it changes the file's condition only. Returns the records dropped.
std::vector<uint64_t> ApplyRenamed(std::map<uint64_t, JournalRecord>& live,
                                   const JournalRecord& renamed) {
  std::vector<uint64_t> dropped;
  auto it = live.find(renamed.id);
  // A rename of a file finished since (or compacted away with it) needs nothing.
  if (it == live.end() || it->second.type != JournalRecord::Type::kPending) return dropped;
  const std::string from = it->second.path;
  if (from != renamed.path) {
    for (const auto& [id, record] : live) {
      if (id != renamed.id && record.type == JournalRecord::Type::kPending &&
          (record.path == from || record.path == renamed.path)) {
        dropped.push_back(id);
      }
    }
  }
  it->second.path = renamed.path;
  it->second.condition = renamed.condition;
  return dropped;
}

}  // namespace

StatusOr<std::unique_ptr<WriteJournal>> WriteJournal::Open(const std::string& path,
                                                           std::vector<JournalRecord>* pending) {
  pending->clear();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, "open write-back journal " + path);
  auto fail = [fd](Status st) {
    ::close(fd);
    return st;
  };
  StatusOr<std::string> data = ReadAll(fd, path);
  if (!data.ok()) return fail(data.status());
  if (IsTornStart(*data)) {
    // Made by a process that died before the magic was durable: no record was ever
    // acknowledged from it (its first append follows the magic's fdatasync).
    if (!data->empty())
      spdlog::info("write-back journal {} was torn at its start; made anew", path);
    if (::ftruncate(fd, 0) != 0) return fail(ErrnoToStatus(errno, "cut " + path));
    Status st = WriteFully(fd, std::string_view(kMagic, sizeof(kMagic)), "write journal " + path);
    if (st.ok() && ::fdatasync(fd) != 0) st = ErrnoToStatus(errno, "sync journal " + path);
    if (st.ok()) st = SyncFolderOf(path);
    if (!st.ok()) return fail(st);
    return std::unique_ptr<WriteJournal>(new WriteJournal(path, fd, sizeof(kMagic), {}, 0, 0));
  }
  if (data->size() < sizeof(kMagic) || std::memcmp(data->data(), kMagic, sizeof(kMagic)) != 0) {
    return fail(CorruptionError(path + " is not a Cairn write-back journal (format 1)"));
  }
  std::map<uint64_t, JournalRecord> live;
  std::set<uint64_t> ids;
  uint64_t max_id = 0;
  uint64_t spool_set = 0;
  size_t at = sizeof(kMagic);
  while (at < data->size()) {
    const std::string_view rest(data->data() + at, data->size() - at);
    bool good = rest.size() >= kFrameHeader;
    uint32_t length = 0;
    uint64_t checksum = 0;
    if (good) {
      std::memcpy(&length, rest.data(), 4);
      std::memcpy(&checksum, rest.data() + 4, 8);
      good = length > 0 && length <= kMaxRecordBytes && length <= rest.size() - kFrameHeader;
    }
    StatusOr<JournalRecord> record = CorruptionError("bad frame");
    bool checksummed = false;
    if (good) {
      std::string covered(rest.substr(0, 4));
      covered.append(rest.substr(kFrameHeader, length));
      checksummed = FrameChecksum(covered) == checksum;
      if (checksummed) record = DecodeJournalRecord(rest.substr(kFrameHeader, length));
      good = checksummed && record.ok();
    }
    if (!good) {
      // Torn: a frame an append could have been writing when the process died runs to or past
      // the end (its length one Append writes, its bytes not all there or not the ones
      // checksummed), or only zeros follow (a file system may show a crashed append's blocks as
      // zeros). Anything else is damage, refused rather than guessed at: a length no Append
      // writes (a damaged record in the middle would otherwise cut every record after it), or
      // a whole, checksummed last record that does not decode (a newer format).
      const bool possible_length = length > 0 && length <= kMaxRecordBytes;
      const bool to_end =
          rest.size() < kFrameHeader ||
          (possible_length && !checksummed &&
           (length > rest.size() - kFrameHeader || kFrameHeader + length == rest.size()));
      const bool zeros = std::all_of(rest.begin(), rest.end(), [](char c) { return c == 0; });
      if (!to_end && !zeros) {
        const std::string why =
            checksummed        ? "a record this version cannot read: " + record.status().message()
            : !possible_length ? "a record length no append writes"
                               : "records follow a bad one";
        return fail(CorruptionError("write-back journal " + path + " is damaged at byte " +
                                    std::to_string(at) + " (" + why + ")"));
      }
      if (::ftruncate(fd, static_cast<off_t>(at)) != 0 || ::fdatasync(fd) != 0) {
        return fail(ErrnoToStatus(errno, "cut the torn end of " + path));
      }
      data->resize(at);
      break;
    }
    if (record->type == JournalRecord::Type::kSpoolSet) {
      if (spool_set != 0 && spool_set != record->id) {
        return fail(CorruptionError("write-back journal " + path + " names two spool sets"));
      }
      spool_set = record->id;
      at += kFrameHeader + length;
      continue;
    }
    max_id = std::max(max_id, record->id);
    if (record->type == JournalRecord::Type::kPending ||
        record->type == JournalRecord::Type::kUpload) {
      if (!ids.insert(record->id).second) {
        return fail(CorruptionError("write-back journal " + path + " repeats id " +
                                    std::to_string(record->id)));
      }
      const uint64_t id = record->id;
      live.emplace(id, std::move(*record));
    } else if (record->type == JournalRecord::Type::kRenamed) {
      for (uint64_t id : ApplyRenamed(live, *record)) live.erase(id);
    } else {
      live.erase(record->id);
    }
    at += kFrameHeader + length;
  }
  if (::lseek(fd, 0, SEEK_END) < 0) return fail(ErrnoToStatus(errno, "seek " + path));
  for (const auto& [id, record] : live) pending->push_back(record);
  return std::unique_ptr<WriteJournal>(
      new WriteJournal(path, fd, data->size(), std::move(live), max_id, spool_set));
}

WriteJournal::WriteJournal(std::string path, int fd, uint64_t bytes,
                           std::map<uint64_t, JournalRecord> live, uint64_t max_id,
                           uint64_t spool_set)
    : path_(std::move(path)),
      max_id_at_open_(max_id),
      fd_(fd),
      bytes_(bytes),
      live_(std::move(live)),
      spool_set_(spool_set) {
  MutexLock l(&mu_);
  for (const auto& [id, record] : live_) live_bytes_ += Frame(record).size();
}

size_t WriteJournal::live_records() const {
  MutexLock l(&mu_);
  return live_.size();
}

WriteJournal::~WriteJournal() {
  MutexLock l(&mu_);
  ::close(fd_);
}

uint64_t WriteJournal::bytes() const {
  MutexLock l(&mu_);
  return bytes_;
}

uint64_t WriteJournal::spool_set() const {
  MutexLock l(&mu_);
  return spool_set_;
}

Status WriteJournal::RecordSpoolSet(uint64_t spool_set) {
  if (spool_set == 0) return InvalidArgumentError("a spool set is not 0");
  JournalRecord record;
  record.type = JournalRecord::Type::kSpoolSet;
  record.id = spool_set;
  MutexLock l(&mu_);
  if (spool_set_ == spool_set) return Status::Ok();
  if (spool_set_ != 0) return InvalidArgumentError("the journal has a spool set already");
  CAIRN_RETURN_IF_ERROR(AppendFrameLocked(Frame(record)));
  spool_set_ = spool_set;
  return Status::Ok();
}

Status WriteJournal::AppendFrameLocked(const std::string& frame) {
  if (broken_) {
    return IoError("write-back journal " + path_ +
                   " cannot be appended to: a failed append could not be undone (restart the "
                   "worker; the records before it are kept)");
  }
  Status st = WriteFully(fd_, frame, "append to journal " + path_);
  if (st.ok() && ::fdatasync(fd_) != 0) st = ErrnoToStatus(errno, "sync journal " + path_);
  if (st.ok() && folder_unsynced_) {
    st = SyncFolderOf(path_);
    if (st.ok()) folder_unsynced_ = false;
  }
  if (!st.ok()) {
    // A partial frame must not stay in front of the next one (replay would call it damage, or
    // cut the records after it as a torn end): when it cannot be cut off, nothing more is
    // appended (a later record would be acknowledged and then lost).
    if (::ftruncate(fd_, static_cast<off_t>(bytes_)) == 0) {
      (void)::lseek(fd_, 0, SEEK_END);
    } else {
      broken_ = true;
    }
    return st;
  }
  bytes_ += frame.size();
  return Status::Ok();
}

Status WriteJournal::Append(const JournalRecord& record) {
  if (record.type == JournalRecord::Type::kSpoolSet) {
    return InvalidArgumentError("a spool set is recorded by RecordSpoolSet");
  }
  const std::string frame = Frame(record);
  if (frame.size() - kFrameHeader > kMaxRecordBytes) {
    return InvalidArgumentError("journal record of " + std::to_string(frame.size()) + " bytes");
  }
  MutexLock l(&mu_);
  const bool pending =
      record.type == JournalRecord::Type::kPending || record.type == JournalRecord::Type::kUpload;
  const bool renamed = record.type == JournalRecord::Type::kRenamed;
  if (pending && live_.count(record.id) != 0) {
    return InvalidArgumentError("journal id " + std::to_string(record.id) + " is in use");
  }
  if (renamed && live_.count(record.id) == 0) {
    return InvalidArgumentError("journal id " + std::to_string(record.id) + " is not pending");
  }
  if (CrashPointArmed("write-back-journal-torn") && !broken_) {
    (void)WriteFully(fd_, std::string_view(frame).substr(0, frame.size() / 2), path_);
    (void)::fdatasync(fd_);
    CrashPoint("write-back-journal-torn");
  }
  CAIRN_RETURN_IF_ERROR(AppendFrameLocked(frame));
  if (pending) {
    live_.emplace(record.id, record);
    live_bytes_ += frame.size();
    return Status::Ok();
  }
  if (renamed) {
    // The live record takes the new path (what a compaction writes), and the files the rename
    // replaces are dead (as replay has them); the rename's own frame is dead weight from now on.
    live_bytes_ -= Frame(live_.at(record.id)).size();
    for (uint64_t id : ApplyRenamed(live_, record)) {
      live_bytes_ -= Frame(live_.at(id)).size();
      live_.erase(id);
    }
    live_bytes_ += Frame(live_.at(record.id)).size();
  } else if (auto it = live_.find(record.id); it != live_.end()) {
    live_bytes_ -= Frame(it->second).size();
    live_.erase(it);
  }
  // Worth it once the file is large and at least three quarters dead; a failure here loses
  // nothing (the old file is intact and still appended to).
  if (bytes_ > kCompactBytes && live_bytes_ * 4 < bytes_) (void)CompactLocked();
  return Status::Ok();
}

Status WriteJournal::Compact() {
  MutexLock l(&mu_);
  return CompactLocked();
}

Status WriteJournal::CompactLocked() {
  std::string content(kMagic, sizeof(kMagic));
  if (spool_set_ != 0) {
    JournalRecord set;
    set.type = JournalRecord::Type::kSpoolSet;
    set.id = spool_set_;
    content += Frame(set);
  }
  for (const auto& [id, r] : live_) content += Frame(r);
  const std::string temp = path_ + ".new";
  const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, "create " + temp);
  Status st = WriteFully(fd, content, "write " + temp);
  if (st.ok() && ::fdatasync(fd) != 0) st = ErrnoToStatus(errno, "sync " + temp);
  if (st.ok() && ::rename(temp.c_str(), path_.c_str()) != 0) {
    st = ErrnoToStatus(errno, "rename " + temp);
  }
  if (!st.ok()) {
    ::close(fd);
    ::unlink(temp.c_str());
    return st;
  }
  // Renamed: the new file is the journal now, whatever follows. Appending to the old one (no
  // longer in the folder) would lose every later record at the next start.
  ::close(fd_);
  fd_ = fd;
  bytes_ = content.size();
  (void)::lseek(fd_, 0, SEEK_END);  // Where the writes above left it already.
  // The rename is durable once the folder is synced; until then a crash could bring back the
  // old journal (which holds everything the new one does, but no later record): each append
  // syncs the folder first until that works.
  Status synced = SyncFolderOf(path_);
  folder_unsynced_ = !synced.ok();
  return synced;
}

}  // namespace cairn::write
