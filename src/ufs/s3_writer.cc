// S3UnderStorage::Writer: an object written in parts to an S3-compatible bucket.
//
// Requests:
//  - An object of one part (the common case for small files) is one PUT at Commit.
//  - Otherwise the first full part starts a multipart upload (POST ?uploads); each full part is
//    an UploadPart (PUT ?partNumber=i+1&uploadId=...) as soon as the caller has it, and may be
//    sent again (a part rewritten after it went up); Commit sends the final part and then
//    CompleteMultipartUpload listing parts 1..count.
//  - Every part and PUT body carries Content-MD5: one damaged on the way is refused, not stored.
//  - Abort (and the destructor of an uncommitted writer) sends AbortMultipartUpload.
//
// Conditions: kAbsent sends If-None-Match: *, kVersion sends If-Match: <etag>, on the PUT and
// on CompleteMultipartUpload (AWS honours both since 2024; radosgw and s3rver do not honour them
// on every request), and a HEAD just before the commit checks the condition as well. So a
// conflicting writer is always caught unless it commits between that HEAD and our commit on a
// server that ignores the header (docs/consistency.md).
//
// A commit whose outcome is unknown (a timeout or a reset connection after the request went
// out, a 5xx) may have landed: its failure is marked Status::outcome_unknown() (one that never
// left, a refused connection, is not, and nor is a refusal: a 4xx). The
// writer remembers the ETag it expects (the MD5 of a PUT body, or S3's multipart ETag computed
// from the parts' MD5s); the next Commit first looks at the key with HEAD and reports success if
// the object there carries that ETag and size, rather than failing its retry on its own
// object's condition. Servers whose ETags are computed otherwise (s3rver, SSE-KMS) get a fresh
// attempt instead, which a condition may then refuse: the caller sees the refusal.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/thread_annotations.h"
#include "ufs/s3_digest.h"
#include "ufs/s3_ufs.h"
#include "ufs/s3_xml.h"

namespace cairn::ufs {
namespace {

constexpr uint64_t kMinS3PartSize = 5ull << 20;  // S3's smallest part but the last.

// The failure of a commit request (PUT, CompleteMultipartUpload) the server answered with
// `http_status`: a refusal (4xx) left nothing behind; after a server error (5xx) the object may
// be in place all the same (S3 asks clients to retry them; a gateway in front of the store may
// have lost the answer).
Status CommitFailure(long http_status, Status status) {
  return http_status >= 500 ? status.WithOutcomeUnknown() : status;
}

// The HTTP status S3 would have given the <Error> in a 200 CompleteMultipartUpload answer.
long HttpStatusOfError(const s3::S3ErrorBody& error) {
  if (error.code == "PreconditionFailed") return 412;
  if (error.code == "NoSuchUpload") return 404;
  if (error.code == "InternalError" || error.code == "SlowDown" ||
      error.code == "ServiceUnavailable") {
    return 503;
  }
  return 400;
}

}  // namespace

class S3UnderStorage::Writer : public ObjectWriter {
 public:
  Writer(S3UnderStorage* store, std::string key, PartLayout layout, WriteCondition condition)
      : store_(store),
        key_(std::move(key)),
        resource_(store->ResourceOf(key_)),
        condition_(std::move(condition)),
        layout_(layout),
        ledger_(layout) {}

  ~Writer() override {
    MutexLock lock(&mu_);
    if (committed_ || upload_id_.empty()) return;
    Status st = AbortUpload();
    if (!st.ok()) {
      spdlog::warn(
          "abandoned multipart upload of {} not aborted ({}); the bucket's lifecycle "
          "rule must remove its parts",
          resource_, st.ToString());
    }
  }

  const PartLayout& layout() const override { return layout_; }

  std::string UploadToken() const override {
    MutexLock lock(&mu_);
    return committed_ || aborted_ ? "" : upload_id_;
  }

  Status Begin() override {
    MutexLock lock(&mu_);
    if (committed_ || aborted_) return FailedPreconditionError("write of " + resource_ + " ended");
    return EnsureUpload();
  }

  Status WritePart(uint32_t index, std::span<const char> data) override {
    std::string upload_id;
    {
      MutexLock lock(&mu_);
      CAIRN_RETURN_IF_ERROR(CheckOpen());
      CAIRN_RETURN_IF_ERROR(ledger_.CheckFullPart(index, data.size()));
      CAIRN_RETURN_IF_ERROR(EnsureUpload());
      upload_id = upload_id_;
    }
    const s3::Md5Digest md5 = s3::Md5(data);
    CAIRN_ASSIGN_OR_RETURN(std::string etag, UploadPart(upload_id, index, data, md5));
    MutexLock lock(&mu_);
    parts_[index] = Part{std::move(etag), md5};
    ledger_.Record(index, data.size());
    return Status::Ok();
  }

  StatusOr<ObjectInfo> Commit(uint64_t size, std::span<const char> tail) override {
    MutexLock lock(&mu_);
    CAIRN_RETURN_IF_ERROR(CheckOpen());
    CAIRN_ASSIGN_OR_RETURN(uint32_t count, ledger_.CheckCommit(size, tail.size()));
    if (!expected_etag_.empty()) {
      CAIRN_ASSIGN_OR_RETURN(std::optional<ObjectInfo> landed, EarlierCommitLanded(size));
      if (landed) return Finish(*std::move(landed));
    }
    CAIRN_RETURN_IF_ERROR(CheckConditionByHead());
    StatusOr<ObjectInfo> result = count <= 1 ? PutWhole(tail) : CompleteUpload(count, tail);
    if (!result.ok()) {
      if (!result.status().outcome_unknown()) expected_etag_.clear();
      return result.status();
    }
    return Finish(std::move(result).value());
  }

  void SetCondition(WriteCondition condition) override { condition_ = std::move(condition); }

  Status Abort() override {
    MutexLock lock(&mu_);
    if (committed_) return FailedPreconditionError("write of " + resource_ + " already committed");
    aborted_ = true;
    parts_.clear();
    if (upload_id_.empty()) return Status::Ok();
    CAIRN_RETURN_IF_ERROR(AbortUpload());
    upload_id_.clear();
    return Status::Ok();
  }

 private:
  struct Part {
    std::string etag;  // As the server returned it.
    s3::Md5Digest md5;
  };

  Status CheckOpen() const REQUIRES(mu_) {
    if (committed_ || aborted_) {
      return FailedPreconditionError("write of " + resource_ + " already " +
                                     (committed_ ? "committed" : "aborted"));
    }
    return Status::Ok();
  }

  // After a successful commit: a multipart upload left over from before the object turned out
  // to fit one PUT is aborted (best effort).
  ObjectInfo Finish(ObjectInfo info) REQUIRES(mu_) {
    committed_ = true;
    expected_etag_.clear();
    if (!upload_id_.empty() && !completed_upload_) {
      Status st = AbortUpload();
      if (!st.ok()) spdlog::warn("unused multipart upload of {}: {}", resource_, st.ToString());
    }
    upload_id_.clear();
    parts_.clear();
    return info;
  }

  StatusOr<std::optional<ObjectInfo>> EarlierCommitLanded(uint64_t size) REQUIRES(mu_) {
    StatusOr<ObjectInfo> now = store_->Stat(key_);
    if (!now.ok() && now.status().code() != StatusCode::kNotFound) return now.status();
    if (now.ok() && now->version == expected_etag_ && now->size == size) {
      completed_upload_ = true;  // Whichever way it landed, the upload is used up.
      return std::optional<ObjectInfo>(std::move(now).value());
    }
    expected_etag_.clear();
    return std::optional<ObjectInfo>();
  }

  // The condition, checked by HEAD (servers that ignore the conditional headers).
  Status CheckConditionByHead() REQUIRES(mu_) {
    if (condition_.kind == WriteCondition::Kind::kNone) return Status::Ok();
    StatusOr<ObjectInfo> now = store_->Stat(key_);
    if (!now.ok() && now.status().code() != StatusCode::kNotFound) return now.status();
    if (condition_.kind == WriteCondition::Kind::kAbsent) {
      return now.ok() ? AlreadyExistsError(resource_ + " already exists") : Status::Ok();
    }
    if (!now.ok() || now->version != condition_.version) {
      return FailedPreconditionError(resource_ + " is no longer version " + condition_.version +
                                     " (" + (now.ok() ? "now " + now->version : "deleted") + ")");
    }
    return Status::Ok();
  }

  // A 412 from the server, in the words of the condition.
  Status ConditionRefused(const Status& status) const {
    if (status.code() != StatusCode::kFailedPrecondition) return status;
    if (condition_.kind == WriteCondition::Kind::kAbsent) {
      return AlreadyExistsError(resource_ + " already exists (" + status.message() + ")");
    }
    return FailedPreconditionError(resource_ + " is no longer version " + condition_.version +
                                   " (" + status.message() + ")");
  }

  void AddConditionHeaders(std::vector<std::string>& headers) const {
    if (condition_.kind == WriteCondition::Kind::kAbsent) headers.push_back("If-None-Match: *");
    if (condition_.kind == WriteCondition::Kind::kVersion) {
      // Unquoted: radosgw 16 compares the header's bytes with its stored ETag and refuses the
      // quoted form; AWS compares ETags without their quotes, so either form works there.
      headers.push_back("If-Match: " + condition_.version);
    }
  }

  s3::HttpRequest Request(std::string method, std::string query, std::span<const char> body,
                          const s3::Md5Digest* md5) const {
    s3::HttpRequest req;
    req.method = std::move(method);
    req.url = s3::ObjectUrl(store_->endpoint_, store_->bucket_, store_->path_style_,
                            store_->FullKey(key_), query);
    req.headers =
        store_->BaseHeaders(body.empty() ? std::string(s3::kEmptySha256) : s3::Sha256Hex(body));
    if (md5 != nullptr) req.headers.push_back("Content-MD5: " + s3::Base64(*md5));
    req.upload = body;
    req.timeout_ms = store_->TimeoutFor(body.size());
    return req;
  }

  // Starts the multipart upload if there is none yet.
  Status EnsureUpload() REQUIRES(mu_) {
    if (!upload_id_.empty()) return Status::Ok();
    s3::RequestContext ctx = store_->Context("CreateMultipartUpload", resource_);
    s3::HttpRequest req = Request("POST", "uploads=", {}, nullptr);
    req.headers.push_back("Content-Type: application/octet-stream");
    CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, store_->Send(std::move(req), ctx));
    if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
    StatusOr<std::string> id = s3::ParseInitiateMultipartUpload(resp.body);
    if (!id.ok()) {
      return UnavailableError("CreateMultipartUpload " + resource_ + ": " + id.status().message());
    }
    upload_id_ = std::move(id).value();
    return Status::Ok();
  }

  std::string UploadQuery(const std::string& upload_id, uint32_t index) const {
    return s3::CanonicalQuery({{"partNumber", std::to_string(index + 1)}, {"uploadId", upload_id}});
  }

  StatusOr<std::string> UploadPart(const std::string& upload_id, uint32_t index,
                                   std::span<const char> data, const s3::Md5Digest& md5) const {
    s3::RequestContext ctx = store_->Context("UploadPart", resource_);
    CAIRN_ASSIGN_OR_RETURN(
        s3::HttpResponse resp,
        store_->Send(Request("PUT", UploadQuery(upload_id, index), data, &md5), ctx));
    if (resp.status != 200) return s3::StatusFromHttp(resp.status, resp.body, ctx);
    std::string etag = resp.Header("etag");
    if (s3::StripETagQuotes(etag).empty()) {
      return UnavailableError("UploadPart " + resource_ + " part " + std::to_string(index + 1) +
                              " returned no ETag");
    }
    return etag;
  }

  StatusOr<ObjectInfo> PutWhole(std::span<const char> data) REQUIRES(mu_) {
    const s3::Md5Digest md5 = s3::Md5(data);
    expected_etag_ = s3::Hex(md5);
    s3::RequestContext ctx = store_->Context("PUT", resource_);
    s3::HttpRequest req = Request("PUT", "", data, &md5);
    req.headers.push_back("Content-Type: application/octet-stream");
    AddConditionHeaders(req.headers);
    CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, store_->Send(std::move(req), ctx));
    if (resp.status != 200) {
      return CommitFailure(resp.status,
                           ConditionRefused(s3::StatusFromHttp(resp.status, resp.body, ctx)));
    }
    return Committed(data.size(), s3::StripETagQuotes(resp.Header("etag")), resp);
  }

  StatusOr<ObjectInfo> CompleteUpload(uint32_t count, std::span<const char> tail) REQUIRES(mu_) {
    const uint32_t last = count - 1;
    const s3::Md5Digest tail_md5 = s3::Md5(tail);
    StatusOr<std::string> tail_etag = UploadPart(upload_id_, last, tail, tail_md5);
    // A part, stored or not, puts nothing under the key.
    if (!tail_etag.ok()) return tail_etag.status().WithOutcomeKnown();
    parts_[last] = Part{std::move(tail_etag).value(), tail_md5};
    ledger_.Record(last, tail.size());

    std::vector<s3::CompletedPart> listed;
    std::vector<s3::Md5Digest> md5s;
    for (uint32_t i = 0; i < count; ++i) {
      const Part& part = parts_.at(i);  // CheckCommit saw parts 0..last-1; `last` is above.
      listed.push_back({i + 1, part.etag});
      md5s.push_back(part.md5);
    }
    expected_etag_ = s3::MultipartETag(md5s);
    const std::string body = s3::BuildCompleteMultipartUpload(listed);
    s3::RequestContext ctx = store_->Context("CompleteMultipartUpload", resource_);
    s3::HttpRequest req = Request("POST", s3::CanonicalQuery({{"uploadId", upload_id_}}),
                                  std::span<const char>(body.data(), body.size()), nullptr);
    req.headers.push_back("Content-Type: application/xml");
    AddConditionHeaders(req.headers);
    CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, store_->Send(std::move(req), ctx));
    if (resp.status != 200) {
      return CommitFailure(resp.status,
                           ConditionRefused(s3::StatusFromHttp(resp.status, resp.body, ctx)));
    }
    s3::S3ErrorBody error;
    StatusOr<std::string> etag = s3::ParseCompleteMultipartUpload(resp.body, &error);
    if (!etag.ok()) {
      if (!error.code.empty()) {
        const long status = HttpStatusOfError(error);
        return CommitFailure(status, ConditionRefused(s3::StatusFromHttp(status, resp.body, ctx)));
      }
      // A cut or garbled answer: the upload may or may not be complete.
      return UnavailableError("CompleteMultipartUpload " + resource_ + ": " +
                              etag.status().message())
          .WithOutcomeUnknown();
    }
    completed_upload_ = true;
    uint64_t size = layout().Offset(last) + tail.size();
    return Committed(size, std::move(etag).value(), resp);
  }

  ObjectInfo Committed(uint64_t size, std::string etag, const s3::HttpResponse& resp) const {
    ObjectInfo info;
    info.key = key_;
    info.size = size;
    info.version = std::move(etag);
    // The server's clock at the commit. (S3 dates a multipart object by its upload's start; a
    // later Stat shows that. Cairn keys cached data by version, not by time.)
    StatusOr<int64_t> date = s3::ParseHttpDate(resp.Header("date"));
    if (date.ok()) info.mtime_ns = *date;
    return info;
  }

  Status AbortUpload() REQUIRES(mu_) { return store_->AbortUpload(key_, upload_id_); }

  S3UnderStorage* const store_;
  const std::string key_;
  const std::string resource_;
  WriteCondition condition_;
  const PartLayout layout_;
  mutable Mutex mu_;
  PartLedger ledger_ GUARDED_BY(mu_);
  std::map<uint32_t, Part> parts_ GUARDED_BY(mu_);
  std::string upload_id_ GUARDED_BY(mu_);  // Empty until the first full part.
  // The ETag a commit attempt whose outcome is unknown would have produced; empty otherwise.
  std::string expected_etag_ GUARDED_BY(mu_);
  bool completed_upload_ GUARDED_BY(mu_) = false;
  bool committed_ GUARDED_BY(mu_) = false;
  bool aborted_ GUARDED_BY(mu_) = false;
};

Status S3UnderStorage::AbortUpload(std::string_view key, std::string_view token) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  // It goes into a signed query string: S3's ids are printable ASCII.
  if (token.empty() || token.size() > 1024 ||
      std::any_of(token.begin(), token.end(), [](char c) { return c < 0x21 || c > 0x7e; })) {
    return InvalidArgumentError("not a multipart upload id: '" + std::string(token) + "'");
  }
  const std::string resource = ResourceOf(key);
  s3::RequestContext ctx = Context("AbortMultipartUpload", resource);
  s3::HttpRequest req;
  req.method = "DELETE";
  req.url = s3::ObjectUrl(endpoint_, bucket_, path_style_, FullKey(key),
                          s3::CanonicalQuery({{"uploadId", std::string(token)}}));
  req.headers = BaseHeaders(s3::kEmptySha256);
  req.timeout_ms = TimeoutFor(0);
  CAIRN_ASSIGN_OR_RETURN(s3::HttpResponse resp, Send(std::move(req), ctx));
  // 404 NoSuchUpload: already gone (aborted or completed by an attempt whose reply was lost).
  if (resp.status == 204 || resp.status == 200 || resp.status == 404) return Status::Ok();
  if (resp.status == 405 || resp.status == 501) {
    return UnimplementedError("the server at " + endpoint_text_ +
                              " cannot abort multipart uploads (HTTP " +
                              std::to_string(resp.status) + "): the parts of " + resource +
                              " stay until a lifecycle rule removes them");
  }
  return s3::StatusFromHttp(resp.status, resp.body, ctx);
}

StatusOr<std::unique_ptr<ObjectWriter>> S3UnderStorage::StartWrite(std::string_view key,
                                                                   const WriterOptions& options) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  if (options.part_size < kMinS3PartSize) {
    return InvalidArgumentError("S3 parts must be at least 5 MiB, got " +
                                std::to_string(options.part_size) + " bytes");
  }
  CAIRN_ASSIGN_OR_RETURN(PartLayout layout, PartLayout::Create(options.part_size));
  if (options.condition.kind == WriteCondition::Kind::kVersion) {
    // It goes into an If-Match header line of a request signed with our keys.
    const std::string& v = options.condition.version;
    if (v.empty() || v.size() > 1024 ||
        std::any_of(v.begin(), v.end(), [](char c) { return c < 0x21 || c > 0x7e || c == '"'; })) {
      return InvalidArgumentError("expected version of '" + std::string(key) + "' is not an ETag");
    }
  }
  return std::unique_ptr<ObjectWriter>(
      std::make_unique<Writer>(this, std::string(key), layout, options.condition));
}

}  // namespace cairn::ufs
