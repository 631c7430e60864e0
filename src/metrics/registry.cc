#include "metrics/registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

#include "metrics/text_format.h"

namespace cairn::metrics {
namespace {

std::vector<std::string> SampleNames(const std::string& name, MetricType type) {
  if (type == MetricType::kHistogram) return {name + "_bucket", name + "_sum", name + "_count"};
  return {name};
}

// Validates and sorts `labels`; returns the rendered `a="x",b="y"` text.
StatusOr<std::string> CanonicalLabels(Labels* labels, MetricType type) {
  std::sort(labels->begin(), labels->end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text;
  for (size_t i = 0; i < labels->size(); ++i) {
    const auto& [label, value] = (*labels)[i];
    if (!IsValidLabelName(label)) return InvalidArgumentError("invalid label name '" + label + "'");
    if (type == MetricType::kHistogram && label == "le") {
      return InvalidArgumentError("label name 'le' is reserved for histogram buckets");
    }
    if (i > 0 && (*labels)[i - 1].first == label) {
      return InvalidArgumentError("duplicate label name '" + label + "'");
    }
    if (i > 0) text.push_back(',');
    text.append(label);
    text.append("=\"");
    AppendEscapedLabelValue(value, &text);
    text.push_back('"');
  }
  return text;
}

Status ValidateBounds(std::vector<double>* bounds) {
  if (!bounds->empty() && bounds->back() == INFINITY) bounds->pop_back();
  for (size_t i = 0; i < bounds->size(); ++i) {
    if (!std::isfinite((*bounds)[i])) {
      return InvalidArgumentError("histogram bucket bounds must be finite");
    }
    if (i > 0 && !((*bounds)[i - 1] < (*bounds)[i])) {
      return InvalidArgumentError("histogram bucket bounds must be strictly increasing");
    }
  }
  return Status::Ok();
}

// Appends "name{labels}" or "name{labels,extra}" (extra is already rendered, e.g. le="0.5").
void AppendSampleName(std::string_view name, std::string_view label_text, std::string_view extra,
                      std::string* out) {
  out->append(name);
  if (label_text.empty() && extra.empty()) return;
  out->push_back('{');
  out->append(label_text);
  if (!label_text.empty() && !extra.empty()) out->push_back(',');
  out->append(extra);
  out->push_back('}');
}

}  // namespace

Registry::~Registry() = default;

void Registry::RecordError(Status error) {
  spdlog::error("metrics registration: {}", error.ToString());
  if (first_error_.ok()) first_error_ = std::move(error);
}

Registry::Series* Registry::FindOrAddSeries(std::string name, std::string help, MetricType type,
                                            const std::vector<double>* bounds, Labels labels,
                                            bool is_callback) {
  if (!IsValidMetricName(name)) {
    RecordError(InvalidArgumentError("invalid metric name '" + name + "'"));
    return nullptr;
  }
  StatusOr<std::string> label_text = CanonicalLabels(&labels, type);
  if (!label_text.ok()) {
    RecordError(label_text.status().WithContext("metric '" + name + "'"));
    return nullptr;
  }

  Family* family = nullptr;
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    family = it->second;
    if (family->type != type || family->help != help ||
        (bounds != nullptr && family->bounds != *bounds)) {
      RecordError(InvalidArgumentError("metric '" + name +
                                       "' registered again with a different type, help or "
                                       "bucket bounds"));
      return nullptr;
    }
  } else {
    const std::vector<std::string> samples = SampleNames(name, type);
    for (const std::string& sample : samples) {
      if (auto clash = sample_names_.find(sample); clash != sample_names_.end()) {
        RecordError(InvalidArgumentError("metric '" + name + "' prints sample '" + sample +
                                         "', already printed by metric '" + clash->second + "'"));
        return nullptr;
      }
    }
    for (const std::string& sample : samples) sample_names_.emplace(sample, name);
    auto created = std::make_unique<Family>();
    created->name = name;
    created->help = std::move(help);
    created->type = type;
    if (bounds != nullptr) created->bounds = *bounds;
    family = created.get();
    families_.push_back(std::move(created));
    by_name_.emplace(std::move(name), family);
  }

  for (const std::unique_ptr<Series>& series : family->series) {
    if (series->labels != labels) continue;
    if (series->is_callback != is_callback) {
      RecordError(InvalidArgumentError("series of metric '" + family->name + "' {" +
                                       series->label_text +
                                       "} registered both as a callback and as a value"));
      return nullptr;
    }
    return series.get();
  }
  auto series = std::make_unique<Series>();
  series->labels = std::move(labels);
  series->label_text = std::move(label_text).value();
  series->is_callback = is_callback;
  family->series.push_back(std::move(series));
  return family->series.back().get();
}

Counter* Registry::AddCounter(std::string name, std::string help, Labels labels) {
  MutexLock lock(&mu_);
  Series* series = FindOrAddSeries(std::move(name), std::move(help), MetricType::kCounter, nullptr,
                                   std::move(labels), /*is_callback=*/false);
  if (series == nullptr) {
    detached_counters_.push_back(std::make_unique<Counter>());
    return detached_counters_.back().get();
  }
  if (series->counter == nullptr) series->counter = std::make_unique<Counter>();
  return series->counter.get();
}

Gauge* Registry::AddGauge(std::string name, std::string help, Labels labels) {
  MutexLock lock(&mu_);
  Series* series = FindOrAddSeries(std::move(name), std::move(help), MetricType::kGauge, nullptr,
                                   std::move(labels), /*is_callback=*/false);
  if (series == nullptr) {
    detached_gauges_.push_back(std::make_unique<Gauge>());
    return detached_gauges_.back().get();
  }
  if (series->gauge == nullptr) series->gauge = std::make_unique<Gauge>();
  return series->gauge.get();
}

Histogram* Registry::AddHistogram(std::string name, std::string help,
                                  std::vector<double> bucket_bounds, Labels labels) {
  MutexLock lock(&mu_);
  Series* series = nullptr;
  if (Status valid = ValidateBounds(&bucket_bounds); !valid.ok()) {
    RecordError(valid.WithContext("metric '" + name + "'"));
  } else {
    series = FindOrAddSeries(std::move(name), std::move(help), MetricType::kHistogram,
                             &bucket_bounds, std::move(labels), /*is_callback=*/false);
  }
  if (series == nullptr) {
    detached_histograms_.push_back(std::make_unique<Histogram>(std::move(bucket_bounds)));
    return detached_histograms_.back().get();
  }
  if (series->histogram == nullptr) {
    series->histogram = std::make_unique<Histogram>(std::move(bucket_bounds));
  }
  return series->histogram.get();
}

void Registry::AddCallback(std::string name, std::string help, MetricType type,
                           std::function<double()> fn, Labels labels) {
  MutexLock lock(&mu_);
  if (type == MetricType::kHistogram) {
    RecordError(InvalidArgumentError("callback metric '" + name + "' cannot be a histogram"));
    return;
  }
  if (!fn) {
    RecordError(InvalidArgumentError("callback metric '" + name + "' has an empty function"));
    return;
  }
  Series* series = FindOrAddSeries(std::move(name), std::move(help), type, nullptr,
                                   std::move(labels), /*is_callback=*/true);
  if (series != nullptr) series->callback = std::move(fn);
}

bool Registry::RemoveCallback(std::string_view name, Labels labels) {
  std::sort(labels.begin(), labels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Destroyed after the lock is released: a capture's destructor may do anything.
  std::function<double()> removed;
  {
    MutexLock lock(&mu_);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return false;
    Family* family = it->second;
    auto series = std::find_if(
        family->series.begin(), family->series.end(),
        [&](const std::unique_ptr<Series>& s) { return s->is_callback && s->labels == labels; });
    if (series == family->series.end()) return false;
    removed = std::move((*series)->callback);
    family->series.erase(series);
    if (family->series.empty()) {
      // Forget the family entirely, so the name can be registered afresh (e.g. with new help).
      for (const std::string& sample : SampleNames(family->name, family->type)) {
        sample_names_.erase(sample);
      }
      by_name_.erase(it);
      std::erase_if(families_,
                    [family](const std::unique_ptr<Family>& f) { return f.get() == family; });
    }
  }
  return true;
}

Status Registry::registration_status() const {
  MutexLock lock(&mu_);
  return first_error_;
}

std::string Registry::ExposeText() const {
  std::string out;
  MutexLock lock(&mu_);
  for (const std::unique_ptr<Family>& family : families_) {
    if (!family->series.empty()) AppendFamily(*family, &out);
  }
  return out;
}

void Registry::AppendFamily(const Family& family, std::string* out) const {
  const std::string& name = family.name;
  if (!family.help.empty()) {
    out->append("# HELP ").append(name).push_back(' ');
    AppendEscapedHelp(family.help, out);
    out->push_back('\n');
  }
  out->append("# TYPE ").append(name).push_back(' ');
  out->append(MetricTypeName(family.type)).push_back('\n');

  for (const std::unique_ptr<Series>& series : family.series) {
    if (series->is_callback) {
      double value;
      try {
        value = series->callback();
      } catch (const std::exception& e) {
        spdlog::warn("metrics: callback of '{}' threw: {}", name, e.what());
        continue;
      } catch (...) {
        spdlog::warn("metrics: callback of '{}' threw", name);
        continue;
      }
      AppendSampleName(name, series->label_text, "", out);
      out->push_back(' ');
      AppendDouble(value, out);
      out->push_back('\n');
    } else if (series->counter != nullptr) {
      AppendSampleName(name, series->label_text, "", out);
      out->push_back(' ');
      AppendUint(series->counter->value(), out);
      out->push_back('\n');
    } else if (series->gauge != nullptr) {
      AppendSampleName(name, series->label_text, "", out);
      out->push_back(' ');
      AppendDouble(series->gauge->value(), out);
      out->push_back('\n');
    } else if (series->histogram != nullptr) {
      const Histogram::Snapshot snap = series->histogram->Collect();
      const std::string bucket_name = name + "_bucket";
      std::string le;
      for (size_t b = 0; b < snap.cumulative.size(); ++b) {
        le.assign("le=\"");
        AppendDouble(b < snap.bounds.size() ? snap.bounds[b] : INFINITY, &le);
        le.push_back('"');
        AppendSampleName(bucket_name, series->label_text, le, out);
        out->push_back(' ');
        AppendUint(snap.cumulative[b], out);
        out->push_back('\n');
      }
      AppendSampleName(name + "_sum", series->label_text, "", out);
      out->push_back(' ');
      AppendDouble(snap.sum, out);
      out->push_back('\n');
      AppendSampleName(name + "_count", series->label_text, "", out);
      out->push_back(' ');
      AppendUint(snap.count, out);
      out->push_back('\n');
    }
  }
}

}  // namespace cairn::metrics
