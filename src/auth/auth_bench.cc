// The cost of authorization on the request path (docs/benchmarks.md, "Authorization"):
// a grant check per page request, linear over the cluster's grants or through PolicyIndex, and
// a token verification per connection.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "auth/policy.h"
#include "auth/token.h"

namespace cairn::auth {
namespace {

// `grants` grants over `grants / 10` principals, each on its own team folder.
Policy MakePolicy(int grants) {
  Policy p{true, {}};
  for (int i = 0; i < grants; ++i) {
    p.grants.push_back({"team-" + std::to_string(i / 10),
                        "/lake/team-" + std::to_string(i / 10) + "/set-" + std::to_string(i % 10),
                        static_cast<AccessSet>(Access::kRead)});
  }
  return p;
}

const Identity kCaller{Identity::Source::kCertificate, "team-3", false};
const std::string kPath = "/lake/team-3/set-7/shard-000123.tar";

void BM_AuthorizeLinear(benchmark::State& state) {
  Policy p = MakePolicy(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(Authorize(p, kCaller, kPath, Access::kRead).ok());
  }
}
BENCHMARK(BM_AuthorizeLinear)->Arg(10)->Arg(1000)->Arg(10000);

void BM_AuthorizeIndexed(benchmark::State& state) {
  PolicyIndex index(MakePolicy(static_cast<int>(state.range(0))));
  for (auto _ : state) {
    benchmark::DoNotOptimize(index.Authorize(kCaller, kPath, Access::kRead).ok());
  }
}
BENCHMARK(BM_AuthorizeIndexed)->Arg(10)->Arg(1000)->Arg(10000);

void BM_VerifyToken(benchmark::State& state) {
  auto keys = GenerateTokenKey();
  auto signer = TokenSigner::FromPrivateKeyPem(keys->private_key);
  auto verifier = TokenVerifier::FromPublicKeyPems({keys->public_key});
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::string token = *signer->Sign({"job-7", now, now + 3600, ""});
  for (auto _ : state) {
    benchmark::DoNotOptimize(verifier->Verify(token, now).ok());
  }
}
BENCHMARK(BM_VerifyToken);

}  // namespace
}  // namespace cairn::auth

BENCHMARK_MAIN();
