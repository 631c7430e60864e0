// Registry: owns a process's metrics and renders them in the Prometheus text format 0.0.4.
//
// Components register their metrics once at start-up and keep the returned pointers for the hot
// path; the HTTP server (metrics/http_server.h) calls ExposeText() on each scrape. A family is one
// metric name with one HELP, one TYPE and (for histograms) one set of buckets; its series differ by
// labels and are printed together under one header:
//
//   # HELP cairn_reads_total Page reads served.
//   # TYPE cairn_reads_total counter
//   cairn_reads_total{source="cache"} 10
//   cairn_reads_total{source="ufs"} 2
//
// Registration is get-or-create: adding the same name and labels again (with the same type, help
// and buckets) returns the existing metric, so two components may share a series. Labels are
// stored and printed sorted by name; their order in the call does not matter.
//
// Registration errors (invalid metric or label name, duplicate label name, a name reused with
// another type, help or bucket set, a name that clashes with a histogram's _bucket/_sum/_count)
// are programming errors, but must not crash a server: the Add* call still returns a working
// metric, owned by the Registry but never exported, logs the error, and registration_status()
// reports the first such error so tests and start-up code can assert on it.
//
// Families are printed in first-registration order, series in registration order.
// Thread-safety: all methods are thread-safe. Updates through returned pointers never lock.
#ifndef CAIRN_METRICS_REGISTRY_H_
#define CAIRN_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "metrics/metric.h"

namespace cairn::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // Returns the counter of series (name, labels), creating it at 0. Never null; the Registry owns
  // it and it lives as long as the Registry. On a registration error (see the file comment) the
  // counter is a working but unexported one.
  Counter* AddCounter(std::string name, std::string help, Labels labels = {});

  // As AddCounter, for a gauge.
  Gauge* AddGauge(std::string name, std::string help, Labels labels = {});

  // As AddCounter, for a histogram with the given finite, strictly increasing bucket upper bounds
  // (+Inf is implicit; a trailing +Inf is accepted and dropped; an empty list leaves only +Inf).
  // Every series of one family must use the same bounds. The label name "le" is reserved.
  Histogram* AddHistogram(std::string name, std::string help, std::vector<double> bucket_bounds,
                          Labels labels = {});

  // Registers a series whose value `fn` computes at each scrape (e.g. page store used bytes).
  // `type` is kCounter, kGauge or kUntyped (kHistogram is a registration error). Adding a
  // callback for an existing callback series replaces its function.
  // `fn` runs on the scraping thread while the Registry's lock is held: it must be thread-safe,
  // fast, and must not call into this Registry. It must stay callable until RemoveCallback() for
  // its series returns or the Registry is destroyed. If it throws, the series is left out of that
  // scrape (and the error logged).
  void AddCallback(std::string name, std::string help, MetricType type, std::function<double()> fn,
                   Labels labels = {});

  // Unregisters the callback series (name, labels). Returns false if there is no such callback
  // series. When it returns, the function is not running and will not be called again, so its
  // captures may be destroyed.
  bool RemoveCallback(std::string_view name, Labels labels);

  // The text exposition (Content-Type "text/plain; version=0.0.4") of every exported series.
  std::string ExposeText() const;

  // OK, or the first registration error seen (all of them are logged).
  Status registration_status() const;

 private:
  struct Series {
    Labels labels;           // Sorted by name.
    std::string label_text;  // `a="x",b="y"`: escaped, without braces; empty without labels.
    bool is_callback = false;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> callback;
  };
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::vector<double> bounds;  // Histograms only.
    std::vector<std::unique_ptr<Series>> series;
  };

  // Finds or creates the series (name, labels) of a family of `type`; `bounds` only for
  // histograms. Returns nullptr after recording the error on any conflict.
  Series* FindOrAddSeries(std::string name, std::string help, MetricType type,
                          const std::vector<double>* bounds, Labels labels, bool is_callback)
      REQUIRES(mu_);
  void RecordError(Status error) REQUIRES(mu_);
  void AppendFamily(const Family& family, std::string* out) const REQUIRES(mu_);

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Family>> families_ GUARDED_BY(mu_);  // Registration order.
  std::map<std::string, Family*, std::less<>> by_name_ GUARDED_BY(mu_);
  // Every sample name a family prints (a histogram prints three) -> that family's name.
  std::map<std::string, std::string, std::less<>> sample_names_ GUARDED_BY(mu_);
  Status first_error_ GUARDED_BY(mu_);
  // Owners of the unexported metrics returned after registration errors.
  std::vector<std::unique_ptr<Counter>> detached_counters_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Gauge>> detached_gauges_ GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Histogram>> detached_histograms_ GUARDED_BY(mu_);
};

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_REGISTRY_H_
