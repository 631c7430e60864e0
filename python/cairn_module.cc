// cairn._cairn: the Python extension over libcairn (include/cairn/client.h). The package around
// it (python/cairn/) gives it its Python shape: file objects, fsspec, PyTorch datasets. This
// layer only moves bytes and errors across the language boundary:
//   * the GIL is released for every call that may wait on a worker, a source or the disk;
//   * readinto/write take any buffer (bytearray, memoryview, numpy array) without a copy on
//     this side (the client copies written bytes once, into its request);
//   * errors become OSError subclasses (py_errors.h); nothing escapes as a C++ exception.
//
// Lifetime: a Reader or Writer keeps its Client's core alive (shared_ptr), so closing the
// Python Client while a file is open, or dropping it first, is safe. `abandon()` is for a
// forked child: the core's threads do not exist there, so the child must neither use nor
// destroy it; abandon leaks it on purpose and the Python layer builds a new one
// (docs/python.md, "fork").
//
// Thread-safety: every class may be used from several Python threads at once (the C++ client
// is thread-safe; the pointer swap of close/abandon is guarded by a mutex).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "cairn/client.h"
#include "config/config.h"
#include "py_errors.h"

namespace cairn::python {
namespace {

namespace py = pybind11;
using Core = std::shared_ptr<Client>;

// Largest single read or read_range a call may ask for: a bytes object is built in one piece.
constexpr uint64_t kMaxReadBytes = 1ull << 40;
constexpr int kMaxParallelism = 256;

[[noreturn]] void RaiseValue(const std::string& message) { throw py::value_error(message); }

// A writable or readable view of a Python buffer, held while the GIL is released. The exporter
// cannot resize or free the memory while the view exists (PEP 3118).
struct BufferView {
  py::buffer_info info;
  char* data() const { return static_cast<char*>(info.ptr); }
  size_t size() const { return static_cast<size_t>(info.size * info.itemsize); }
};

BufferView ViewOf(const py::buffer& buffer, bool writable) {
  py::buffer_info info = buffer.request(writable);
  if (!info.strides.empty()) {
    // A strided (non-contiguous) array cannot be filled or sent as one span.
    ssize_t expect = info.itemsize;
    for (ssize_t i = info.ndim - 1; i >= 0; --i) {
      if (info.shape[i] > 1 && info.strides[i] != expect) {
        RaiseValue("the buffer must be C-contiguous");
      }
      expect *= info.shape[i];
    }
  }
  return BufferView{std::move(info)};
}

// Fills `out` from `reader` at `offset` until it is full or the file ends; returns the bytes
// read. Runs without the GIL.
StatusOr<size_t> ReadFully(FileReader& reader, uint64_t offset, std::span<char> out) {
  size_t done = 0;
  while (done < out.size()) {
    StatusOr<size_t> n = reader.Read(offset + done, out.subspan(done));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    done += *n;
  }
  return done;
}

// A bytes object of `size` bytes, filled by `fill` (which runs without the GIL and returns how
// many bytes it wrote, at most `size`). The object is ours alone until returned, so writing
// into it is safe.
template <typename Fill>
py::bytes FillBytes(size_t size, Fill&& fill) {
  py::bytes out = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, size));
  if (!out) throw py::error_already_set();
  char* data = PyBytes_AS_STRING(out.ptr());
  size_t got = 0;
  {
    py::gil_scoped_release release;
    got = fill(std::span<char>(data, size));
  }
  if (got == size) return out;
  return py::bytes(data, got);  // A short read (end of file): keep the prefix.
}

// Runs `drop` (the last steps of a file or client object: the client's destructor joins its
// threads, a file's may wait for a request in flight) with the GIL released, so that an object
// the garbage collector frees stalls no other Python thread. pybind11 calls destructors with the
// GIL held (2.10 has no option to release it), and nothing can reach the object any more. While
// the interpreter finalizes, a thread must not give the GIL up: `drop` runs with it.
template <typename Drop>
void WithoutGil(Drop&& drop) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();  // Public since 3.13, which removed the other.
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (finalizing) {
    drop();
    return;
  }
  py::gil_scoped_release release;
  drop();
}

py::dict InfoDict(const FileInfo& info) {
  py::dict d;
  d["name"] = info.name;
  d["size"] = info.size;
  d["version"] = info.version;
  d["mtime_ns"] = info.mtime_ns;
  d["is_dir"] = info.is_dir;
  return d;
}

class PyReader {
 public:
  PyReader(Core core, std::string path, std::unique_ptr<FileReader> reader)
      : core_(std::move(core)), path_(std::move(path)), reader_(std::move(reader)) {}
  PyReader(PyReader&&) = default;  // Returned to Python by value.
  PyReader& operator=(PyReader&&) = delete;
  // The reader first: it uses the core.
  ~PyReader() {
    if (reader_ == nullptr && core_ == nullptr) return;  // Moved from, or abandoned.
    WithoutGil([this] {
      reader_.reset();
      core_.reset();
    });
  }

  py::dict info() const { return InfoDict(Get().info()); }
  uint64_t size() const { return Get().info().size; }

  py::bytes Read(uint64_t offset, int64_t length) {
    FileReader& reader = Get();
    const uint64_t size = reader.info().size;
    uint64_t n = offset >= size ? 0 : size - offset;
    if (length >= 0) n = std::min<uint64_t>(n, static_cast<uint64_t>(length));
    if (n > kMaxReadBytes) RaiseValue("read of more than 1 TiB at once");
    Status failed;
    py::bytes out = FillBytes(n, [&](std::span<char> buf) -> size_t {
      StatusOr<size_t> got = ReadFully(reader, offset, buf);
      if (!got.ok()) {
        failed = got.status();
        return 0;
      }
      return *got;
    });
    if (!failed.ok()) RaiseStatus(failed, Op::kRead, path_);
    return out;
  }

  size_t ReadInto(uint64_t offset, const py::buffer& buffer) {
    FileReader& reader = Get();
    BufferView view = ViewOf(buffer, /*writable=*/true);
    StatusOr<size_t> got = 0;
    {
      py::gil_scoped_release release;
      got = ReadFully(reader, offset, std::span<char>(view.data(), view.size()));
    }
    if (!got.ok()) RaiseStatus(got.status(), Op::kRead, path_);
    return *got;
  }

  // In a forked child: leak the reader and its core (see PyClient::Abandon).
  void Abandon() {
    (void)reader_.release();
    if (core_) new Core(std::move(core_));
  }

 private:
  FileReader& Get() const {
    if (reader_ == nullptr) RaiseValue("I/O operation on an abandoned file");
    return *reader_;
  }

  Core core_;  // Keeps the client alive while the reader is.
  const std::string path_;
  std::unique_ptr<FileReader> reader_;
};

class PyWriter {
 public:
  PyWriter(Core core, std::string path, std::unique_ptr<FileWriter> writer)
      : core_(std::move(core)), path_(std::move(path)), writer_(std::move(writer)) {}
  PyWriter(PyWriter&&) = default;  // Returned to Python by value.
  PyWriter& operator=(PyWriter&&) = delete;
  // The writer first: it uses the core (a writer never closed aborts its file here).
  ~PyWriter() {
    if (writer_ == nullptr && core_ == nullptr) return;  // Moved from, or abandoned.
    WithoutGil([this] {
      writer_.reset();
      core_.reset();
    });
  }

  void Write(uint64_t offset, const py::buffer& buffer) {
    FileWriter& writer = Get();
    BufferView view = ViewOf(buffer, /*writable=*/false);
    Status s;
    {
      py::gil_scoped_release release;
      s = writer.Write(offset, std::span<const char>(view.data(), view.size()));
    }
    if (!s.ok()) RaiseStatus(s, Op::kWrite, path_);
  }

  void Truncate(uint64_t size) {
    FileWriter& writer = Get();
    Status s;
    {
      py::gil_scoped_release release;
      s = writer.Truncate(size);
    }
    if (!s.ok()) RaiseStatus(s, Op::kWrite, path_);
  }

  uint64_t size() const { return Get().size(); }

  py::dict Sync() { return Commit(/*close=*/false); }
  py::dict Close() { return Commit(/*close=*/true); }

  // In a forked child: leak the writer and its core. Never abort from the child: the handle
  // is the parent's, which may still be writing.
  void Abandon() {
    (void)writer_.release();
    if (core_) new Core(std::move(core_));
  }

  void Abort() {
    FileWriter& writer = Get();
    Status s;
    {
      py::gil_scoped_release release;
      s = writer.Abort();
    }
    if (!s.ok()) RaiseStatus(s, Op::kWrite, path_);
  }

 private:
  py::dict Commit(bool close) {
    FileWriter& writer = Get();
    StatusOr<FileInfo> info = FileInfo{};
    {
      py::gil_scoped_release release;
      info = close ? writer.Close() : writer.Sync();
    }
    if (!info.ok()) RaiseStatus(info.status(), Op::kCommit, path_);
    return InfoDict(*info);
  }

  FileWriter& Get() const {
    if (writer_ == nullptr) RaiseValue("I/O operation on an abandoned file");
    return *writer_;
  }

  Core core_;
  const std::string path_;
  std::unique_ptr<FileWriter> writer_;
};

// A client's cached metadata, handed from a parent process to the client its forked child
// builds (Client::ExportMetadata, ClientOptions::metadata_seed). Opaque to Python.
struct PyMetadataSeed {
  std::shared_ptr<const MetadataSeed> seed;
};

class PyClient {
 public:
  PyClient(const std::string& config_json, const std::string& token, bool short_circuit,
           bool no_cache, uint64_t buffer_bytes, const PyMetadataSeed* seed) {
    StatusOr<config::Config> config = config::ParseConfig(config_json);
    if (!config.ok()) RaiseValue("cairn.connect: " + config.status().message());
    ClientOptions options = config->client;
    options.token = token;
    options.short_circuit = short_circuit;
    options.no_cache = no_cache;
    if (buffer_bytes != 0) options.buffer_bytes = buffer_bytes;
    // Each sample is read once into the caller's memory (readinto) or a new bytes object: a
    // page buffer slot would only add fresh memory and a copy (ClientOptions).
    options.unbuffered_small_files = true;
    if (seed != nullptr) options.metadata_seed = seed->seed;
    StatusOr<std::unique_ptr<Client>> client = InvalidArgumentError("not created");
    {
      py::gil_scoped_release release;  // Cluster mode waits for etcd's first answer.
      client = Client::Create(options);
    }
    if (!client.ok()) {
      if (client.status().code() == StatusCode::kInvalidArgument) {
        RaiseValue("cairn.connect: " + client.status().message());
      }
      RaiseStatus(client.status().WithContext("cairn.connect"), Op::kOther, "");
    }
    core_ = Core(std::move(client).value());
  }

  // A client freed without close(): the last reference joins the client's threads.
  ~PyClient() {
    if (core_ != nullptr) WithoutGil([this] { core_.reset(); });
  }

  // The cached metadata, for the client a forked child makes (called just before a fork).
  PyMetadataSeed ExportMetadata() {
    Core core = Get();
    py::gil_scoped_release release;
    return PyMetadataSeed{core->ExportMetadata()};
  }

  py::dict Stat(const std::string& path) {
    Core core = Get();
    StatusOr<FileInfo> info = FileInfo{};
    {
      py::gil_scoped_release release;
      info = core->Stat(path);
    }
    if (!info.ok()) RaiseStatus(info.status(), Op::kOther, path);
    return InfoDict(*info);
  }

  py::list ListDir(const std::string& path) {
    Core core = Get();
    std::vector<FileInfo> entries;
    Status failed;
    {
      py::gil_scoped_release release;
      std::string token;
      do {
        StatusOr<DirPage> page = core->ListDir(path, token, 1000);
        if (!page.ok()) {
          failed = page.status();
          break;
        }
        for (FileInfo& e : page->entries) entries.push_back(std::move(e));
        token = std::move(page->next_token);
      } while (!token.empty());
    }
    if (!failed.ok()) RaiseStatus(failed, Op::kOther, path);
    py::list out;
    for (const FileInfo& e : entries) out.append(InfoDict(e));
    return out;
  }

  PyReader Open(const std::string& path) {
    Core core = Get();
    StatusOr<std::unique_ptr<FileReader>> reader = InvalidArgumentError("not opened");
    {
      py::gil_scoped_release release;
      reader = core->Open(path);
    }
    if (!reader.ok()) RaiseStatus(reader.status(), Op::kRead, path);
    return PyReader(core, path, std::move(reader).value());
  }

  PyWriter OpenWrite(const std::string& path, bool create, bool exclusive, bool truncate) {
    Core core = Get();
    RequireWritable(*core, path);
    StatusOr<std::unique_ptr<FileWriter>> writer = InvalidArgumentError("not opened");
    {
      py::gil_scoped_release release;
      writer = core->OpenForWrite(path, WriteOptions{create, exclusive, truncate});
    }
    if (!writer.ok()) RaiseStatus(writer.status(), Op::kOpenWrite, path);
    return PyWriter(core, path, std::move(writer).value());
  }

  py::bytes ReadRange(const std::string& path, uint64_t offset, int64_t length) {
    PyReader reader = Open(path);
    return reader.Read(offset, length);
  }

  // Reads every (path, offset, length) with up to `parallelism` reads at once; a length < 0
  // reads to the end of the file. Each distinct path is opened once, so all its ranges come
  // from one version. Raises the first error (in request order).
  py::list ReadMany(const std::vector<std::tuple<std::string, uint64_t, int64_t>>& requests,
                    int parallelism) {
    if (parallelism < 1 || parallelism > kMaxParallelism) {
      RaiseValue("parallelism must be between 1 and 256");
    }
    Core core = Get();
    const size_t n = requests.size();
    std::vector<std::string> results(n);
    std::vector<Status> errors(n);
    {
      py::gil_scoped_release release;
      std::map<std::string, std::shared_ptr<FileReader>> readers;
      std::mutex readers_mu;
      // Opens once per path (opens of different paths run in parallel; a second asker of one
      // path may open it again, which costs only a metadata-cache hit).
      auto reader_of = [&](const std::string& path) -> StatusOr<std::shared_ptr<FileReader>> {
        {
          std::lock_guard<std::mutex> lock(readers_mu);
          auto it = readers.find(path);
          if (it != readers.end()) return it->second;
        }
        StatusOr<std::unique_ptr<FileReader>> opened = core->Open(path);
        if (!opened.ok()) return opened.status();
        std::shared_ptr<FileReader> reader = std::move(opened).value();
        std::lock_guard<std::mutex> lock(readers_mu);
        return readers.try_emplace(path, std::move(reader)).first->second;
      };
      std::atomic<size_t> next{0};
      // No exception may leave a pool thread (std::terminate would end the interpreter): a
      // range whose read throws (out of memory, mostly) fails alone.
      auto one = [&](size_t i) {
        const auto& [path, offset, length] = requests[i];
        StatusOr<std::shared_ptr<FileReader>> reader = reader_of(path);
        if (!reader.ok()) {
          errors[i] = reader.status();
          return;
        }
        const uint64_t size = (*reader)->info().size;
        uint64_t want = offset >= size ? 0 : size - offset;
        if (length >= 0) want = std::min<uint64_t>(want, static_cast<uint64_t>(length));
        if (want > kMaxReadBytes) {
          errors[i] = InvalidArgumentError("read of more than 1 TiB at once");
          return;
        }
        results[i].resize(want);
        StatusOr<size_t> got = ReadFully(**reader, offset, results[i]);
        if (!got.ok()) {
          errors[i] = got.status();
          return;
        }
        results[i].resize(*got);
      };
      auto work = [&] {
        for (size_t i = next++; i < n; i = next++) {
          try {
            one(i);
          } catch (const std::exception& e) {
            errors[i] = ResourceExhaustedError("read of " + std::get<0>(requests[i]) +
                                               " failed: " + e.what());
          } catch (...) {
            errors[i] = InternalError("read of " + std::get<0>(requests[i]) + " failed");
          }
        }
      };
      const size_t threads = std::min<size_t>(static_cast<size_t>(parallelism), n);
      std::vector<std::thread> pool;
      for (size_t t = 1; t < threads; ++t) {
        try {
          pool.emplace_back(work);
        } catch (const std::exception&) {
          break;  // No more threads to be had (a container's limit): fewer do the work.
        }
      }
      work();
      for (std::thread& t : pool) t.join();
    }
    for (size_t i = 0; i < n; ++i) {
      if (!errors[i].ok()) RaiseStatus(errors[i], Op::kRead, std::get<0>(requests[i]));
    }
    py::list out;
    for (std::string& r : results) {
      out.append(py::bytes(r));
      std::string().swap(r);  // Free as we go: peak memory is about one copy, not two.
    }
    return out;
  }

  void Remove(const std::string& path) {
    Mutate(path, Op::kRemove, [&](Client& c) { return c.Remove(path); });
  }
  void MakeDir(const std::string& path) {
    Mutate(path, Op::kMakeDir, [&](Client& c) { return c.MakeDir(path); });
  }
  void RemoveDir(const std::string& path) {
    Mutate(path, Op::kRemoveDir, [&](Client& c) { return c.RemoveDir(path); });
  }
  void Rename(const std::string& from, const std::string& to, bool no_replace) {
    Core core = Get();
    RequireWritable(*core, from);  // Both names change (as FUSE checks).
    RequireWritable(*core, to);
    Status s;
    {
      py::gil_scoped_release release;
      s = core->Rename(from, to, no_replace);
    }
    if (!s.ok()) RaiseStatus(s, Op::kRename, from);
  }
  bool Writable(const std::string& path) { return Get()->Writable(path); }

  void Invalidate(const std::string& path) {
    Core core = Get();
    Status s;
    {
      py::gil_scoped_release release;
      s = core->Invalidate(path);
    }
    if (!s.ok()) RaiseStatus(s, Op::kOther, path);
  }

  // Client::Load with `progress` (may be None) called on this thread, with the GIL, about 4
  // times a second. An exception from `progress` (KeyboardInterrupt included) stops the load
  // and propagates.
  py::dict Load(const std::string& path, uint64_t max_bytes_per_second, int parallelism,
                int replicas, bool skip_cached, bool verify_only, const py::object& progress) {
    if (parallelism < 1 || parallelism > 4096) RaiseValue("parallelism must be 1 to 4096");
    if (replicas < 0 || replicas > 8) RaiseValue("replicas must be 0 (the mount's) to 8");
    Core core = Get();
    std::atomic<bool> cancel{false};
    LoadOptions options;
    options.max_bytes_per_second = max_bytes_per_second;
    options.parallelism = parallelism;
    options.replicas = replicas;
    options.skip_cached = skip_cached;
    options.verify_only = verify_only;
    options.cancel = &cancel;
    std::unique_ptr<py::error_already_set> callback_error;
    auto on_progress = [&](const LoadProgress& p) {
      if (callback_error != nullptr) return;
      py::gil_scoped_acquire acquire;
      try {
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        if (!progress.is_none()) progress(ProgressDict(p));
      } catch (py::error_already_set& e) {
        callback_error = std::make_unique<py::error_already_set>(std::move(e));
        cancel = true;
      }
    };
    StatusOr<LoadProgress> result = LoadProgress{};
    {
      py::gil_scoped_release release;
      result = core->Load(path, options, on_progress);
    }
    if (callback_error != nullptr) throw std::move(*callback_error);
    if (!result.ok()) RaiseStatus(result.status(), Op::kOther, path);
    return ProgressDict(*result);
  }

  // Client::SyncWrites: blocks (GIL released) until the write-back files under `path` are in
  // their sources or `timeout_s` passes (TimeoutError).
  void SyncWrites(const std::string& path, double timeout_s) {
    Core core = Get();
    Status s;
    {
      py::gil_scoped_release release;
      s = core->SyncWrites(path, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    }
    if (!s.ok()) RaiseStatus(s, Op::kOther, path);
  }

  py::dict Free(const std::string& path) {
    Core core = Get();
    StatusOr<FreeResult> result = FreeResult{};
    {
      py::gil_scoped_release release;
      result = core->Free(path);
    }
    if (!result.ok()) RaiseStatus(result.status(), Op::kOther, path);
    py::dict d;
    d["files"] = result->files;
    d["pages_dropped"] = result->pages_dropped;
    d["failures"] = result->failures;
    return d;
  }

  py::dict Stats() {
    ClientStats s = Get()->Stats();
    py::dict d;
    d["page_reads"] = s.page_reads;
    d["page_read_failures"] = s.page_read_failures;
    d["fallback_bytes"] = s.fallback_bytes;
    d["checksum_failures"] = s.checksum_failures;
    d["buffer_hits"] = s.buffer_hits;
    d["unbuffered_reads"] = s.unbuffered_reads;
    d["short_circuit_reads"] = s.short_circuit_reads;
    d["metadata_hits"] = s.metadata_hits;
    d["metadata_misses"] = s.metadata_misses;
    d["workers"] = s.workers;
    d["etcd_connected"] = s.etcd_connected;
    return d;
  }

  // Drops this handle's reference; the core goes once its open files are closed too.
  void Close() {
    Core old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(core_);
    }
    WithoutGil([&old] { old.reset(); });  // The last reference joins the client's threads.
  }

  // For a forked child (one thread): forget the core without destroying it; its threads are
  // the parent's. No lock: one held by a parent's thread at fork() stays held here forever.
  void Abandon() {
    if (core_) new Core(std::move(core_));  // Leaked on purpose; see the file comment.
  }

  bool closed() {
    std::lock_guard<std::mutex> lock(mu_);
    return core_ == nullptr;
  }

 private:
  static py::dict ProgressDict(const LoadProgress& p) {
    py::dict d;
    d["files_total"] = p.files_total;
    d["files_done"] = p.files_done;
    d["bytes_total"] = p.bytes_total;
    d["bytes_done"] = p.bytes_done;
    d["pages_total"] = p.pages_total;
    d["pages_done"] = p.pages_done;
    d["pages_cached_before"] = p.pages_cached_before;
    d["pages_loaded"] = p.pages_loaded;
    d["pages_failed"] = p.pages_failed;
    d["pages_missing"] = p.pages_missing;
    d["bytes_from_source"] = p.bytes_from_source;
    d["listing_done"] = p.listing_done;
    d["cancelled"] = p.cancelled;
    d["elapsed_seconds"] = p.elapsed_seconds;
    d["missing_files"] = p.missing_files;
    d["first_error"] = p.first_error;
    return d;
  }

  Core Get() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!core_) RaiseValue("I/O operation on a closed cairn client");
    return core_;
  }

  // EROFS, as the FUSE mount answers, for a change outside a writable mount.
  static void RequireWritable(Client& core, const std::string& path) {
    if (!core.Writable(path)) {
      RaiseErrno(EROFS, "not in a writable mount (write_mode through)", path);
    }
  }

  template <typename Fn>
  void Mutate(const std::string& path, Op op, Fn&& fn) {
    Core core = Get();
    RequireWritable(*core, path);
    Status s;
    {
      py::gil_scoped_release release;
      s = fn(*core);
    }
    if (!s.ok()) RaiseStatus(s, op, path);
  }

  std::mutex mu_;
  Core core_;
};

}  // namespace
}  // namespace cairn::python

PYBIND11_MODULE(_cairn, m) {
  namespace py = pybind11;
  using cairn::python::PyClient;
  using cairn::python::PyMetadataSeed;
  using cairn::python::PyReader;
  using cairn::python::PyWriter;
  m.doc() = "Cairn's client core (libcairn); use the `cairn` package, not this module.";

  py::class_<PyReader>(m, "Reader")
      .def_property_readonly("info", &PyReader::info)
      .def_property_readonly("size", &PyReader::size)
      .def("read", &PyReader::Read, py::arg("offset"), py::arg("length") = -1)
      .def("readinto", &PyReader::ReadInto, py::arg("offset"), py::arg("buffer"))
      .def("abandon", &PyReader::Abandon);

  py::class_<PyWriter>(m, "Writer")
      .def("write", &PyWriter::Write, py::arg("offset"), py::arg("data"))
      .def("truncate", &PyWriter::Truncate, py::arg("size"))
      .def_property_readonly("size", &PyWriter::size)
      .def("sync", &PyWriter::Sync)
      .def("close", &PyWriter::Close)
      .def("abort", &PyWriter::Abort)
      .def("abandon", &PyWriter::Abandon);

  py::class_<PyMetadataSeed>(m, "MetadataSeed");
  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::string&, const std::string&, bool, bool, uint64_t,
                    const PyMetadataSeed*>(),
           py::arg("config_json"), py::arg("token") = "", py::arg("short_circuit") = true,
           py::arg("no_cache") = false, py::arg("buffer_bytes") = 0,
           py::arg("seed") = static_cast<const PyMetadataSeed*>(nullptr))
      .def("export_metadata", &PyClient::ExportMetadata)
      .def("stat", &PyClient::Stat, py::arg("path"))
      .def("list_dir", &PyClient::ListDir, py::arg("path"))
      .def("open", &PyClient::Open, py::arg("path"))
      .def("open_write", &PyClient::OpenWrite, py::arg("path"), py::arg("create") = true,
           py::arg("exclusive") = false, py::arg("truncate") = true)
      .def("read_range", &PyClient::ReadRange, py::arg("path"), py::arg("offset"),
           py::arg("length") = -1)
      .def("read_many", &PyClient::ReadMany, py::arg("requests"), py::arg("parallelism") = 16)
      .def("remove", &PyClient::Remove, py::arg("path"))
      .def("make_dir", &PyClient::MakeDir, py::arg("path"))
      .def("remove_dir", &PyClient::RemoveDir, py::arg("path"))
      .def("rename", &PyClient::Rename, py::arg("src"), py::arg("dst"),
           py::arg("no_replace") = false)
      .def("writable", &PyClient::Writable, py::arg("path"))
      .def("invalidate", &PyClient::Invalidate, py::arg("path"))
      .def("load", &PyClient::Load, py::arg("path"), py::arg("max_bytes_per_second") = 0,
           py::arg("parallelism") = 32, py::arg("replicas") = 0, py::arg("skip_cached") = false,
           py::arg("verify_only") = false, py::arg("progress") = py::none())
      .def("free", &PyClient::Free, py::arg("path"))
      .def("sync_writes", &PyClient::SyncWrites, py::arg("path"), py::arg("timeout_s"))
      .def("stats", &PyClient::Stats)
      .def("close", &PyClient::Close)
      .def("abandon", &PyClient::Abandon)
      .def_property_readonly("closed", &PyClient::closed);
}
