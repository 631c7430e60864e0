// page_latency: the round-trip latency of page reads from one worker over the page protocol,
// plaintext or TLS, measured in a client process with no FUSE, no page buffer and no
// short-circuit in between (what TLS adds to a read is the difference between two runs).
//
// Reads `--reads` ranges of `--length` bytes, one at a time, each at the start of a page chosen
// at random among the object's pages, after one pass that reads every page whole (so every
// measured read is a cache hit on the worker). Prints the median, p90 and p99 in microseconds,
// and MB/s. Wrong bytes (checksums that do not match) make it exit 1.
//
//   page_latency --address 127.0.0.1:7070 --mount /bench --key f000.bin --version V
//       --object-size N [--length 4096] [--reads 2000] [--tls-ca CA --tls-cert C --tls-key K]
//
// bench/tls_bench.py runs it against a plaintext and a TLS worker (docs/benchmarks.md).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <vector>

#include "common/checksum.h"
#include "protocol/wire.h"
#include "tls/tls_context.h"
#include "transport/remote_channel.h"

namespace {

using cairn::Status;
using cairn::StatusOr;

struct Flags {
  std::string address, mount, key, version;
  uint64_t object_size = 0;
  uint32_t page_size = 1 << 20;
  uint32_t length = 4096;
  int reads = 2000;
  std::string tls_ca, tls_cert, tls_key;
};

StatusOr<cairn::protocol::PageReply> ReadOnce(cairn::transport::RemoteChannel& channel,
                                              const Flags& f, uint64_t page, uint32_t length,
                                              std::vector<char>* buffer) {
  cairn::protocol::ReadPageRequest r;
  r.page.mount = f.mount;
  r.page.key = f.key;
  r.page.version = f.version;
  r.page.object_size = f.object_size;
  r.page.page_index = page;
  r.page.page_size = f.page_size;
  const uint32_t page_length = cairn::protocol::PageLength(f.object_size, page, f.page_size);
  r.offset = 0;
  r.length = std::min(length, page_length);
  const auto range = cairn::protocol::AlignedRange(0, r.length, page_length);
  buffer->resize(range.size());
  std::promise<StatusOr<cairn::protocol::PageReply>> done;
  channel.Call(
      r, std::span<char>(buffer->data(), buffer->size()),
      [&done](StatusOr<cairn::protocol::PageReply> reply) { done.set_value(std::move(reply)); });
  auto reply = done.get_future().get();
  if (reply.ok() && cairn::ChunkChecksums(std::span<const char>(
                        buffer->data(), reply->data_length)) != reply->checksums) {
    return cairn::CorruptionError("checksum mismatch");
  }
  return reply;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app("Page read latency against one worker (plaintext or TLS)");
  app.add_option("--address", f.address, "Worker host:port")->required();
  app.add_option("--mount", f.mount, "Mount path")->required();
  app.add_option("--key", f.key, "Object key")->required();
  app.add_option("--version", f.version, "Object version")->required();
  app.add_option("--object-size", f.object_size, "Object size in bytes")->required();
  app.add_option("--page-size", f.page_size, "The worker's page size (default 1 MiB)");
  app.add_option("--length", f.length, "Bytes per measured read (default 4096)");
  app.add_option("--reads", f.reads, "Measured reads (default 2000)");
  app.add_option("--tls-ca", f.tls_ca, "CA file: connect with TLS");
  app.add_option("--tls-cert", f.tls_cert, "Client certificate");
  app.add_option("--tls-key", f.tls_key, "Client key");
  CLI11_PARSE(app, argc, argv);
  if (f.object_size == 0 || f.reads < 1 || f.length == 0 || f.length > f.page_size) {
    fmt::print(stderr, "page_latency: bad --object-size, --reads or --length\n");
    return 2;
  }

  cairn::transport::RemoteChannelOptions o;
  o.address = f.address;
  o.page_size = f.page_size;
  o.connections = 1;
  o.short_circuit = false;
  o.request_timeout = std::chrono::milliseconds(10000);
  if (!f.tls_ca.empty()) {
    cairn::tls::TlsOptions t;
    t.ca_file = f.tls_ca;
    t.cert_file = f.tls_cert;
    t.key_file = f.tls_key;
    auto ctx = cairn::tls::TlsContext::Create(cairn::tls::TlsContext::Role::kClient, t);
    if (!ctx.ok()) {
      fmt::print(stderr, "page_latency: {}\n", ctx.status().ToString());
      return 2;
    }
    std::shared_ptr<cairn::tls::TlsContext> shared = std::move(ctx).value();
    o.connect_timeout = std::chrono::milliseconds(3000);
    o.connect = [shared](const std::string& address, std::chrono::milliseconds timeout) {
      return cairn::tls::Dial(shared.get(), address, timeout);
    };
  }
  cairn::transport::RemoteChannel channel(o);
  const uint64_t pages = (f.object_size + f.page_size - 1) / f.page_size;
  std::vector<char> buffer;
  for (uint64_t p = 0; p < pages; ++p) {  // Warm: every page cached on the worker.
    auto r = ReadOnce(channel, f, p, f.page_size, &buffer);
    if (!r.ok()) {
      fmt::print(stderr, "page_latency: warming page {}: {}\n", p, r.status().ToString());
      return 1;
    }
  }
  std::mt19937_64 rng(42);
  std::vector<double> micros;
  micros.reserve(static_cast<size_t>(f.reads));
  uint64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < f.reads; ++i) {
    const uint64_t page = rng() % pages;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = ReadOnce(channel, f, page, f.length, &buffer);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) {
      fmt::print(stderr, "page_latency: read of page {}: {}\n", page, r.status().ToString());
      return 1;
    }
    bytes += r->data_length;
    micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("reads {} length {} p50_us {:.1f} p90_us {:.1f} p99_us {:.1f} mb_per_s {:.1f}\n",
             f.reads, f.length, Percentile(micros, 0.5), Percentile(micros, 0.9),
             Percentile(micros, 0.99), static_cast<double>(bytes) / 1e6 / seconds);
  return 0;
}
