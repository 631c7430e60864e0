// Reading workers' Prometheus /metrics from the CLI (`cairn status`, `cairn report`).
#ifndef CAIRN_CLI_METRICS_SCRAPE_H_
#define CAIRN_CLI_METRICS_SCRAPE_H_

#include <map>
#include <string>

#include "common/status.h"

namespace cairn::cli {

// GET http://address/metrics (1 s connect, 3 s total); Unavailable when the worker does not
// answer or answers non-200.
StatusOr<std::string> FetchMetrics(const std::string& address);

// Sum of every sample of `name` (all label sets) in Prometheus text format.
double SumMetric(const std::string& text, const std::string& name);

// The samples of `name` by the value of one label (`label`="value"), summed over other labels.
// With `where_label` set, only samples whose `where_label` equals `where_value` count.
std::map<std::string, double> MetricByLabel(const std::string& text, const std::string& name,
                                            const std::string& label,
                                            const std::string& where_label = "",
                                            const std::string& where_value = "");

}  // namespace cairn::cli

#endif  // CAIRN_CLI_METRICS_SCRAPE_H_
