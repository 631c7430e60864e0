// Reading workers' Prometheus /metrics from the CLI (`cairn status`, `cairn report`).
#ifndef CAIRN_CLI_METRICS_SCRAPE_H_
#define CAIRN_CLI_METRICS_SCRAPE_H_

#include <map>
#include <string>

#include "cairn/client.h"
#include "common/status.h"
#include "membership/records.h"

namespace cairn::cli {

// GET /metrics of a worker (1 s connect, 3 s total): https:// with `tls` (its CA, and the
// client certificate /metrics asks for) when the record says the endpoint is TLS, else
// http://. Unavailable when the worker does not answer or answers non-200 (the answer's first
// line is in the message: "HTTP 403: /metrics needs a client certificate ...");
// FailedPrecondition for a TLS endpoint without a CA to verify it.
StatusOr<std::string> FetchMetrics(const membership::WorkerRecord& worker, const TlsSettings& tls);

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
