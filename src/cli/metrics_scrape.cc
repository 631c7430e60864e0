#include "cli/metrics_scrape.h"

#include <curl/curl.h>

#include <memory>
#include <sstream>
#include <string_view>

#include "common/logging.h"

namespace cairn::cli {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// Parses one sample line of `name`: its label block (without braces) and value. False if the
// line is another metric, a comment or malformed.
bool ParseSample(const std::string& line, const std::string& name, std::string* labels,
                 double* value) {
  if (line.rfind(name, 0) != 0) return false;
  size_t pos = name.size();
  if (pos >= line.size()) return false;
  labels->clear();
  if (line[pos] == '{') {
    size_t close = line.find('}', pos);
    if (close == std::string::npos) return false;
    *labels = line.substr(pos + 1, close - pos - 1);
    pos = close + 1;
  }
  if (pos >= line.size() || line[pos] != ' ') return false;
  try {
    *value = std::stod(line.substr(pos + 1));
  } catch (...) {
    return false;
  }
  return true;
}

// The value of `label` in a label block like a="x",b="y" (no escapes in our label values).
std::string LabelValue(const std::string& labels, const std::string& label) {
  std::string key = label + "=\"";
  size_t at = 0;
  while ((at = labels.find(key, at)) != std::string::npos) {
    if (at == 0 || labels[at - 1] == ',') {
      size_t start = at + key.size();
      size_t end = labels.find('"', start);
      return end == std::string::npos ? "" : labels.substr(start, end - start);
    }
    at += key.size();
  }
  return "";
}

}  // namespace

StatusOr<std::string> FetchMetrics(const membership::WorkerRecord& worker, const TlsSettings& tls) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return InternalError("curl_easy_init failed");
  const std::string url =
      (worker.metrics_tls ? "https://" : "http://") + worker.metrics_address + "/metrics";
  if (worker.metrics_tls) {
    if (tls.ca_file.empty()) {
      return FailedPreconditionError(url +
                                     " is TLS: give --tls-ca (and --tls-cert/--tls-key, a "
                                     "certificate /metrics accepts)");
    }
    curl_easy_setopt(curl.get(), CURLOPT_CAINFO, tls.ca_file.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_3);
    if (!tls.cert_file.empty()) {
      curl_easy_setopt(curl.get(), CURLOPT_SSLCERT, tls.cert_file.c_str());
      curl_easy_setopt(curl.get(), CURLOPT_SSLKEY, tls.key_file.c_str());
    }
  }
  std::string body;
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT_MS, 1000L);
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 3000L);
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl.get());
  if (rc != CURLE_OK) return UnavailableError(url + ": " + curl_easy_strerror(rc));
  long code = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    // The worker's words, shown on a terminal.
    const std::string first_line = Printable(std::string_view(body).substr(0, body.find('\n')));
    return UnavailableError(url + ": HTTP " + std::to_string(code) +
                            (first_line.empty() ? "" : ": " + first_line));
  }
  return body;
}

double SumMetric(const std::string& text, const std::string& name) {
  double sum = 0;
  std::istringstream in(text);
  std::string line, labels;
  double value = 0;
  while (std::getline(in, line)) {
    if (ParseSample(line, name, &labels, &value)) sum += value;
  }
  return sum;
}

std::map<std::string, double> MetricByLabel(const std::string& text, const std::string& name,
                                            const std::string& label,
                                            const std::string& where_label,
                                            const std::string& where_value) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line, labels;
  double value = 0;
  while (std::getline(in, line)) {
    if (!ParseSample(line, name, &labels, &value)) continue;
    if (!where_label.empty() && LabelValue(labels, where_label) != where_value) continue;
    std::string key = LabelValue(labels, label);
    if (!key.empty()) out[key] += value;
  }
  return out;
}

}  // namespace cairn::cli
