#include "membership/etcd_coordination.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "membership/etcd_json.h"
#include "membership/json_fields.h"
#include "net/stream.h"

namespace cairn::membership {

using etcd::Base64Encode;
using etcd::Int64Field;
using nlohmann::json;

namespace {

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A unary reply body, capped so a broken or hostile endpoint cannot make us buffer without bound.
struct ReplyBody {
  std::string data;
  size_t limit = 0;
  bool too_large = false;
};

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<ReplyBody*>(user);
  if (!etcd::AppendWithinLimit(&body->data, std::string_view(data, size * n), body->limit)) {
    body->too_large = true;
    return 0;  // Aborts the transfer (CURLE_WRITE_ERROR).
  }
  return size * n;
}

// Errors where the request certainly never reached the server: safe to try the next endpoint.
bool NotConnected(CURLcode code) {
  return code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST ||
         code == CURLE_COULDNT_RESOLVE_PROXY;
}

// curl's text for `code`, with what to check when it is a TLS failure on an https endpoint (an
// etcd that requires client certificates closes the connection: "Failure when receiving data").
std::string CurlError(CURLcode code, const std::string& endpoint, const EtcdOptions& o) {
  std::string text = curl_easy_strerror(code);
  const bool tls_failure = code == CURLE_SSL_CONNECT_ERROR ||
                           code == CURLE_PEER_FAILED_VERIFICATION ||
                           code == CURLE_SSL_CERTPROBLEM || code == CURLE_SSL_CACERT_BADFILE ||
                           code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR;
  if (!tls_failure || endpoint.rfind("https://", 0) != 0) return text;
  if (o.tls.cert_file.empty()) {
    return text +
           " (TLS: no client certificate was sent; an etcd with --client-cert-auth needs "
           "--etcd-cert and --etcd-key; etcd's own certificate is checked against " +
           (o.tls.ca_file.empty() ? std::string("the system's CAs") : o.tls.ca_file) + ")";
  }
  return text + " (TLS: etcd's certificate is checked against " +
         (o.tls.ca_file.empty() ? std::string("the system's CAs (--etcd-ca)") : o.tls.ca_file) +
         "; etcd checks " + o.tls.cert_file + ")";
}

void SetCommonOptions(CURL* h, const EtcdOptions& o, const std::string& url,
                      const std::string& body, curl_slist* headers) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "cairn/0.1");
  // TLS 1.2 at least (etcd 3.4 speaks 1.3 too); the peer and its host name are always verified.
  curl_easy_setopt(h, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (!o.tls.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, o.tls.ca_file.c_str());
  if (!o.tls.cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, o.tls.cert_file.c_str());
    curl_easy_setopt(h, CURLOPT_SSLKEY, o.tls.key_file.c_str());
  }
}

// A reply that does not decode breaks the gateway's contract: Internal, as coordination.h says.
template <typename T>
StatusOr<T> Decoded(StatusOr<T> value, std::string_view context) {
  if (value.ok()) return value;
  return InternalError(std::string(context) +
                       ": malformed etcd reply: " + value.status().message());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// One watch: a thread that keeps a /v3/watch stream open, reconnecting after breaks.
class EtcdCoordination::Stream : public WatchHandle {
 public:
  Stream(EtcdCoordination* owner, std::string prefix, int64_t start_revision,
         WatchCallback callback)
      : owner_(owner),
        prefix_(std::move(prefix)),
        next_revision_(start_revision),
        callback_(std::move(callback)),
        lines_(owner->options().max_watch_line_bytes),
        multi_(curl_multi_init()) {}

  ~Stream() override {
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
    }
    cv_.NotifyAll();
    curl_multi_wakeup(multi_);
    if (thread_.joinable()) thread_.join();
    curl_multi_cleanup(multi_);
  }

  // Starts the thread and waits until the first stream is created (OK) or failed.
  Status Start() {
    if (multi_ == nullptr) return InternalError("curl_multi_init failed");
    thread_ = std::thread([this] { Run(); });
    MutexLock lock(&mu_);
    const auto limit = std::chrono::milliseconds(owner_->options().connect_timeout_ms +
                                                 owner_->options().request_timeout_ms);
    if (!cv_.WaitFor(&mu_, limit,
                     [&]() REQUIRES(mu_) { return established_ || !start_status_.ok(); })) {
      return UnavailableError("watch: etcd did not confirm the watch in time");
    }
    return start_status_;
  }

 private:
  void Run() {
    auto backoff = owner_->options().watch_backoff_initial;
    while (true) {
      {
        MutexLock lock(&mu_);
        if (cancelled_ || finished_) return;
      }
      Status s = ConnectOnce();
      MutexLock lock(&mu_);
      if (cancelled_ || finished_) return;
      if (!established_) {
        // The first connection failed: report to Start() and stop (the caller sees the error).
        start_status_ = s.ok() ? UnavailableError("watch stream closed before creation") : s;
        cv_.NotifyAll();
        return;
      }
      if (got_data_) backoff = owner_->options().watch_backoff_initial;
      got_data_ = false;
      cv_.WaitFor(&mu_, backoff, [&]() REQUIRES(mu_) { return cancelled_; });
      backoff = std::min(backoff * 2, owner_->options().watch_backoff_max);
    }
  }

  // Runs one stream on the first reachable endpoint until it ends; returns why it ended.
  Status ConnectOnce() {
    Status last = UnavailableError("no etcd endpoint");
    for (const std::string& endpoint : owner_->EndpointsInOrder()) {
      json create = {{"key", Base64Encode(prefix_.empty() ? std::string(1, '\0') : prefix_)},
                     {"range_end", Base64Encode(etcd::PrefixRangeEnd(prefix_))}};
      int64_t start;
      {
        MutexLock lock(&mu_);
        start = next_revision_;
      }
      if (start > 0) create["start_revision"] = std::to_string(start);
      const std::string body = json{{"create_request", create}}.dump();
      lines_.Clear();
      CURLcode code = Perform(endpoint + "/v3/watch", body);
      if (NotConnected(code)) {
        last = UnavailableError("watch: cannot connect to " + endpoint + ": " +
                                CurlError(code, endpoint, owner_->options()));
        continue;
      }
      owner_->Prefer(endpoint);
      if (!stream_status_.ok()) return stream_status_;
      return UnavailableError(std::string("watch stream on ") + endpoint +
                              " ended: " + CurlError(code, endpoint, owner_->options()));
    }
    return last;
  }

  CURLcode Perform(const std::string& url, const std::string& body) {
    CURL* h = curl_easy_init();
    if (h == nullptr) return CURLE_FAILED_INIT;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    SetCommonOptions(h, owner_->options(), url, body, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Stream::OnData);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, this);
    stream_status_ = Status::Ok();
    curl_multi_add_handle(multi_, h);
    CURLcode result = CURLE_OK;
    while (true) {
      int running = 0;
      curl_multi_perform(multi_, &running);
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg == CURLMSG_DONE) result = msg->data.result;
      }
      if (running == 0) break;
      {
        MutexLock lock(&mu_);
        if (cancelled_) break;
      }
      curl_multi_poll(multi_, nullptr, 0, 1000, nullptr);
    }
    curl_multi_remove_handle(multi_, h);
    curl_easy_cleanup(h);
    curl_slist_free_all(headers);
    return result;
  }

  static size_t OnData(char* data, size_t size, size_t n, void* user) {
    auto* self = static_cast<Stream*>(user);
    Status appended = self->lines_.Append(std::string_view(data, size * n));
    // The lines before a too-long one are whole replies: handle them first.
    while (std::optional<std::string> line = self->lines_.NextLine()) {
      if (line->find_first_not_of(" \r\t") == std::string::npos) continue;
      if (!self->HandleMessage(*line)) return 0;  // Abort the transfer: the watch is over.
    }
    if (!appended.ok()) {
      // One event we cannot hold: skipping it would leave a gap, so the watch ends (a mirror
      // re-lists) rather than buffering without bound.
      self->Finish(ResourceExhaustedError("watch: reply " + appended.message() +
                                          " (EtcdOptions::max_watch_line_bytes)"));
      return 0;
    }
    return size * n;
  }

  // Handles one reply; false when the watch must end (final error delivered or cancelled).
  bool HandleMessage(const std::string& line) {
    StatusOr<etcd::WatchMessage> decoded = etcd::DecodeWatchMessage(line);
    if (!decoded.ok()) {
      // etcd never sends this: a broken proxy or endpoint. End the watch with the reason rather
      // than reconnect to the same garbage forever.
      return Finish(InternalError("watch: malformed etcd reply: " + decoded.status().message() +
                                  ": " + line.substr(0, 200)));
    }
    etcd::WatchMessage& m = *decoded;
    if (m.error) {
      stream_status_ = UnavailableError("watch: stream error: " + *m.error);
      return false;  // Reconnect from next_revision_.
    }
    {
      MutexLock lock(&mu_);
      if (cancelled_) return false;
      got_data_ = true;
      if (m.created && !established_) {
        if (next_revision_ == 0) next_revision_ = m.header_revision + 1;
        established_ = true;
        cv_.NotifyAll();
      }
    }
    if (m.canceled) {
      Status final = m.compact_revision > 0
                         ? FailedPreconditionError("watch: revision compacted up to " +
                                                   std::to_string(m.compact_revision))
                         : FailedPreconditionError("watch cancelled by etcd: " + m.cancel_reason);
      return Finish(final);
    }
    WatchUpdate update;
    for (WatchEvent& ev : m.events) {
      if (!update.events.empty() && update.events.back().mod_revision != ev.mod_revision) {
        Deliver(std::move(update));
        update = WatchUpdate{};
      }
      update.events.push_back(std::move(ev));
    }
    if (!update.events.empty()) Deliver(std::move(update));
    return true;
  }

  void Deliver(WatchUpdate update) {
    const int64_t rev = update.events.back().mod_revision;
    callback_(update);
    MutexLock lock(&mu_);
    next_revision_ = rev + 1;
  }

  // Delivers a final error (if the start already succeeded) and ends the watch.
  bool Finish(Status status) {
    bool established;
    {
      MutexLock lock(&mu_);
      finished_ = true;
      established = established_;
      if (!established) {
        start_status_ = status;
        cv_.NotifyAll();
      }
    }
    if (established) callback_(WatchUpdate{status, {}});
    return false;
  }

  EtcdCoordination* const owner_;
  const std::string prefix_;
  Mutex mu_;
  CondVar cv_;
  bool cancelled_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  bool established_ GUARDED_BY(mu_) = false;
  bool got_data_ GUARDED_BY(mu_) = false;
  Status start_status_ GUARDED_BY(mu_);
  int64_t next_revision_ GUARDED_BY(mu_);
  WatchCallback callback_;    // Only the watch thread calls it.
  etcd::LineSplitter lines_;  // Watch thread only: the current stream's reply lines.
  Status stream_status_;      // Watch thread only: why the current stream was aborted.
  CURLM* multi_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------

namespace {

// Whether the host of "http://host[:port][/...]" is a loopback name or address.
bool PlaintextHostIsLoopback(std::string_view url) {
  std::string_view rest = url.substr(std::string_view("http://").size());
  rest = rest.substr(0, rest.find('/'));
  std::string_view host = rest;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    host = close == std::string_view::npos ? rest : rest.substr(1, close - 1);
  } else {
    host = rest.substr(0, rest.rfind(':'));
  }
  return net::IsLoopbackHost(host);
}

}  // namespace

StatusOr<std::unique_ptr<EtcdCoordination>> EtcdCoordination::Create(EtcdOptions options) {
  std::vector<std::string> endpoints;
  std::stringstream list(options.endpoints);
  std::string item;
  while (std::getline(list, item, ',')) {
    while (!item.empty() && item.back() == '/') item.pop_back();
    if (item.empty()) continue;
    if (item.rfind("http://", 0) != 0 && item.rfind("https://", 0) != 0) {
      return InvalidArgumentError("etcd endpoint '" + item + "' must start with http(s)://");
    }
    endpoints.push_back(item);
  }
  if (endpoints.empty()) return InvalidArgumentError("no etcd endpoints given");
  const EtcdTls& tls = options.tls;
  const bool tls_files = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
  for (const std::string& e : endpoints) {
    if (e.rfind("http://", 0) == 0 && !PlaintextHostIsLoopback(e)) {
      if (options.insecure_plaintext.empty()) {
        return InvalidArgumentError(
            "etcd endpoint " + e +
            " is plaintext beyond loopback: use https:// with "
            "--etcd-ca (and --etcd-cert/--etcd-key), or state why plaintext is acceptable "
            "with --etcd-insecure-plaintext REASON (docs/security.md)");
      }
      spdlog::warn("talking plaintext to etcd at {} (--etcd-insecure-plaintext: {})", e,
                   options.insecure_plaintext);
    }
    if (tls_files && e.rfind("http://", 0) == 0) {
      // The TLS files would be ignored and everything sent in the clear: say so instead.
      return InvalidArgumentError("etcd TLS files are given but endpoint " + e +
                                  " is plaintext http://: use https://");
    }
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgumentError(
        "etcd TLS: a client certificate needs its key, and a key its "
        "certificate");
  }
  for (const std::string* file : {&tls.ca_file, &tls.cert_file, &tls.key_file}) {
    if (!file->empty() && access(file->c_str(), R_OK) != 0) {
      return InvalidArgumentError("etcd TLS file " + *file + ": " + std::strerror(errno));
    }
  }
  GlobalInitOnce();
  return std::unique_ptr<EtcdCoordination>(
      new EtcdCoordination(std::move(options), std::move(endpoints)));
}

EtcdCoordination::EtcdCoordination(EtcdOptions options, std::vector<std::string> endpoints)
    : options_(std::move(options)), endpoints_(std::move(endpoints)) {}

EtcdCoordination::~EtcdCoordination() {
  MutexLock lock(&pool_mu_);
  for (void* h : idle_handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

std::vector<std::string> EtcdCoordination::EndpointsInOrder() const {
  std::vector<std::string> out;
  const size_t first = preferred_.load() % endpoints_.size();
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    out.push_back(endpoints_[(first + i) % endpoints_.size()]);
  }
  return out;
}

void EtcdCoordination::Prefer(const std::string& endpoint) {
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i] == endpoint) preferred_.store(i);
  }
}

StatusOr<json> EtcdCoordination::Post(const std::string& path, const json& body,
                                      std::string_view context) {
  CURL* h = nullptr;
  {
    MutexLock lock(&pool_mu_);
    if (!idle_handles_.empty()) {
      h = static_cast<CURL*>(idle_handles_.back());
      idle_handles_.pop_back();
    }
  }
  if (h == nullptr) h = curl_easy_init();
  if (h == nullptr) return InternalError("curl_easy_init failed");
  const std::string payload = body.dump();
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  Status last = UnavailableError(std::string(context) + ": no etcd endpoint");
  ReplyBody reply;
  reply.limit = options_.max_reply_bytes;
  long http_status = 0;
  bool answered = false;
  for (const std::string& endpoint : EndpointsInOrder()) {
    curl_easy_reset(h);
    reply.data.clear();
    const std::string url = endpoint + path;
    SetCommonOptions(h, options_, url, payload, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, options_.request_timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &AppendBody);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    CURLcode code = curl_easy_perform(h);
    if (code == CURLE_OK) {
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http_status);
      Prefer(endpoint);
      answered = true;
      break;
    }
    if (reply.too_large) {
      last = ResourceExhaustedError(std::string(context) + ": reply from etcd at " + endpoint +
                                    " is larger than " + std::to_string(reply.limit) +
                                    " bytes (EtcdOptions::max_reply_bytes); refused");
      break;
    }
    last = UnavailableError(std::string(context) + ": etcd at " + endpoint + ": " +
                            CurlError(code, endpoint, options_));
    if (!NotConnected(code)) break;  // The request may have been sent: do not resend it.
  }
  curl_slist_free_all(headers);
  {
    MutexLock lock(&pool_mu_);
    idle_handles_.push_back(h);
  }
  if (!answered) return last;
  if (http_status != 200) {
    return etcd::ErrorReplyToStatus(static_cast<int>(http_status), reply.data, context);
  }
  StatusOr<json> j = etcd::ParseReply(reply.data);
  if (!j.ok()) {
    return InternalError(std::string(context) +
                         ": unparseable etcd reply: " + reply.data.substr(0, 200));
  }
  return j;
}

StatusOr<int64_t> EtcdCoordination::Put(std::string_view key, std::string_view value,
                                        int64_t lease_id) {
  if (key.empty()) return InvalidArgumentError("put: empty key");
  json req = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease_id != 0) req["lease"] = std::to_string(lease_id);
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/kv/put", req, "etcd put"));
  return Decoded(etcd::HeaderRevision(reply), "etcd put");
}

StatusOr<KeyValue> EtcdCoordination::Get(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(json reply,
                         Post("/v3/kv/range", {{"key", Base64Encode(key)}}, "etcd get"));
  CAIRN_ASSIGN_OR_RETURN(RangeResult range, Decoded(etcd::DecodeRangeReply(reply), "etcd get"));
  if (range.entries.empty()) return NotFoundError("no key '" + std::string(key) + "'");
  return std::move(range.entries.front());
}

StatusOr<RangeResult> EtcdCoordination::GetPrefix(std::string_view prefix) {
  json req = {{"key", Base64Encode(prefix.empty() ? std::string_view("\0", 1) : prefix)},
              {"range_end", Base64Encode(etcd::PrefixRangeEnd(prefix))}};
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/kv/range", req, "etcd get prefix"));
  return Decoded(etcd::DecodeRangeReply(reply), "etcd get prefix");
}

StatusOr<bool> EtcdCoordination::Delete(std::string_view key) {
  CAIRN_ASSIGN_OR_RETURN(json reply,
                         Post("/v3/kv/deleterange", {{"key", Base64Encode(key)}}, "etcd delete"));
  StatusOr<int64_t> deleted = Int64Field(reply, "deleted");
  if (!deleted.ok()) return InternalError("etcd delete: " + deleted.status().message());
  return *deleted > 0;
}

StatusOr<int64_t> EtcdCoordination::CompareAndSwap(std::string_view key,
                                                   int64_t expected_mod_revision,
                                                   std::string_view value, int64_t lease_id) {
  if (key.empty()) return InvalidArgumentError("compare-and-swap: empty key");
  // A missing key has mod_revision 0 in etcd's compare, so "must not exist" is MOD == 0.
  json put = {{"key", Base64Encode(key)}, {"value", Base64Encode(value)}};
  if (lease_id != 0) put["lease"] = std::to_string(lease_id);
  json req = {{"compare", json::array({{{"key", Base64Encode(key)},
                                        {"target", "MOD"},
                                        {"result", "EQUAL"},
                                        {"mod_revision", std::to_string(expected_mod_revision)}}})},
              {"success", json::array({{{"request_put", put}}})}};
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/kv/txn", req, "etcd compare-and-swap"));
  CAIRN_ASSIGN_OR_RETURN(bool succeeded,
                         Decoded(etcd::DecodeTxnSucceeded(reply), "etcd compare-and-swap"));
  if (!succeeded) {
    return FailedPreconditionError("compare-and-swap on '" + std::string(key) +
                                   "': mod_revision is not " +
                                   std::to_string(expected_mod_revision));
  }
  return Decoded(etcd::HeaderRevision(reply), "etcd compare-and-swap");
}

StatusOr<int64_t> EtcdCoordination::GrantLease(std::chrono::seconds ttl) {
  if (ttl < std::chrono::seconds(1)) return InvalidArgumentError("lease TTL must be >= 1 s");
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/lease/grant", {{"TTL", std::to_string(ttl.count())}},
                                          "etcd lease grant"));
  if (const json* error = JsonMember(reply, "error");
      error != nullptr && error->is_string() && !error->get_ref<const std::string&>().empty()) {
    return UnavailableError("etcd lease grant: " + error->get<std::string>());
  }
  StatusOr<int64_t> id = Int64Field(reply, "ID");
  if (!id.ok() || *id == 0) return InternalError("etcd lease grant: reply without ID");
  return *id;
}

Status EtcdCoordination::KeepAlive(int64_t lease_id) {
  // LeaseKeepAlive is a stream; the gateway answers one request body with one result and closes.
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/lease/keepalive", {{"ID", std::to_string(lease_id)}},
                                          "etcd lease keepalive"));
  if (const json* error = JsonMember(reply, "error")) {
    return UnavailableError("etcd lease keepalive: " +
                            error->dump(-1, ' ', false, json::error_handler_t::replace));
  }
  const json* result = JsonMember(reply, "result");
  if (result == nullptr) result = &reply;
  StatusOr<int64_t> ttl = Int64Field(*result, "TTL");
  if (!ttl.ok()) return InternalError("etcd lease keepalive: " + ttl.status().message());
  // etcd answers a keep-alive of an unknown (expired, revoked) lease with TTL 0.
  if (*ttl <= 0) return NotFoundError("lease " + std::to_string(lease_id) + " not found");
  return Status::Ok();
}

Status EtcdCoordination::RevokeLease(int64_t lease_id) {
  CAIRN_ASSIGN_OR_RETURN(json reply, Post("/v3/lease/revoke", {{"ID", std::to_string(lease_id)}},
                                          "etcd lease revoke"));
  return Status::Ok();
}

StatusOr<std::unique_ptr<WatchHandle>> EtcdCoordination::Watch(std::string_view prefix,
                                                               int64_t start_revision,
                                                               WatchCallback callback) {
  if (start_revision < 0) return InvalidArgumentError("watch: negative start revision");
  if (start_revision > 0) {
    // etcd confirms a watch on a compacted revision before cancelling it, so check first with a
    // read at that revision (a future revision is also refused by the read but fine to watch).
    json probe = {{"key", Base64Encode(std::string(1, '\0'))},
                  {"revision", std::to_string(start_revision)},
                  {"limit", "1"},
                  {"count_only", true}};
    StatusOr<json> r = Post("/v3/kv/range", probe, "etcd watch");
    if (!r.ok() && (r.status().code() != StatusCode::kFailedPrecondition ||
                    r.status().message().find("compacted") != std::string::npos)) {
      return r.status();
    }
  }
  auto stream =
      std::make_unique<Stream>(this, std::string(prefix), start_revision, std::move(callback));
  CAIRN_RETURN_IF_ERROR(stream->Start());
  return std::unique_ptr<WatchHandle>(std::move(stream));
}

}  // namespace cairn::membership
