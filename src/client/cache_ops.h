// Cache management operations of the client library: preload (Load) and free (Free) of a file or
// of everything under a folder, over the page fetcher's control requests (protocol flags LOAD,
// PROBE, DROP). See Client::Load / Client::Free in include/cairn/client.h for the contract.
//
// A walk lists the source through the client's metadata path (folders page by page, depth
// first), so files appear while the operation runs; pages are sent to their workers with a bound
// on requests in flight and, for loads, a token bucket on bytes read from the source.
// Thread-safety: each call is independent; the fetcher's channels are thread-safe.
#ifndef CAIRN_CLIENT_CACHE_OPS_H_
#define CAIRN_CLIENT_CACHE_OPS_H_

#include <functional>
#include <string>

#include "cairn/client.h"
#include "client/page_fetcher.h"

namespace cairn::client {

// What the operations need from the client: its namespace (stat, list, object resolution) and
// its fetcher.
struct CacheOpsContext {
  Client* client;  // Stat / ListDir.
  PageFetcher* fetcher;
  // Builds the ObjectRef of a file at `path` whose stat is `info`.
  std::function<StatusOr<ObjectRef>(const std::string& path, const FileInfo& info)> resolve;
};

StatusOr<LoadProgress> RunLoad(const CacheOpsContext& ctx, std::string_view path,
                               const LoadOptions& options,
                               const std::function<void(const LoadProgress&)>& progress);

StatusOr<FreeResult> RunFree(const CacheOpsContext& ctx, std::string_view path);

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_CACHE_OPS_H_
