// Fuzzes the decoders of what comes from etcd or from a file: etcd gateway replies and watch
// lines, the worker, mount-table and rules documents stored in etcd, and the config file. Any
// bytes must decode to a value or an error (never an exception, a crash or UB), and a decoded
// rules document must encode and decode back to the same rules.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/config.h"
#include "membership/etcd_json.h"
#include "membership/records.h"
#include "membership/rule_store.h"

using namespace cairn;
using namespace cairn::membership;
using namespace cairn::membership::etcd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto reply = ParseReply(text); reply.ok()) {
    (void)HeaderRevision(*reply);
    (void)DecodeRangeReply(*reply);
    (void)DecodeTxnSucceeded(*reply);
  }
  (void)DecodeWatchMessage(text);
  (void)ErrorReplyToStatus(400, text, "fuzz");
  LineSplitter lines(1024);
  if (lines.Append(text).ok()) {
    while (lines.NextLine()) {
    }
  }
  (void)Base64Decode(text);
  (void)DecodeWorkerRecord(text);
  (void)DecodeMountTable(text);
  if (auto rules = DecodeRules(text); rules.ok()) {
    auto again = DecodeRules(EncodeRules(*rules));
    if (!again.ok() || again->size() != rules->size()) std::abort();
  }
  (void)config::ParseConfig(text);
  return 0;
}
