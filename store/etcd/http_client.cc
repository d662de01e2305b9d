#include "store/etcd/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

namespace resilient::store::etcd {
namespace {

static_assert(kCurlErrorBytes == CURL_ERROR_SIZE);

std::once_flag gCurlInit;

size_t writeCallback(char* data, size_t size, size_t count, void* user) noexcept {
  auto* sink = static_cast<ResponseSink*>(user);
  const size_t n = size * count;
  try {
    if (sink->onLine == nullptr) {
      sink->body.append(data, n);
      return n;
    }
    sink->partial.append(data, n);
    size_t start = 0;
    for (;;) {
      const size_t nl = sink->partial.find('\n', start);
      if (nl == std::string::npos) {
        break;
      }
      const std::string_view line(sink->partial.data() + start, nl - start);
      start = nl + 1;
      if (!line.empty() && !(*sink->onLine)(line)) {
        sink->aborted = true;
        return 0;  // ends the transfer
      }
    }
    sink->partial.erase(0, start);
    return n;
  } catch (...) {
    sink->aborted = true;
    return 0;
  }
}

}  // namespace

void initCurl() {
  std::call_once(gCurlInit, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string urlOf(const std::string& endpoint, std::string_view path) {
  const bool hasScheme = endpoint.find("://") != std::string::npos;
  return (hasScheme ? endpoint : "http://" + endpoint) + std::string(path);
}

void* newRequestHeaders() {
  curl_slist* h = nullptr;
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, "Expect:");  // no 100-continue round trip for large bodies
  return h;
}

void freeRequestHeaders(void* headers) {
  curl_slist_free_all(static_cast<curl_slist*>(headers));
}

void prepareRequest(void* handle, const std::string& url, const std::string& body,
                    std::chrono::milliseconds timeout, void* headers, ResponseSink* sink,
                    char* errbuf) {
  CURL* curl = static_cast<CURL*>(handle);
  errbuf[0] = 0;
  const long ms = std::max<long>(1, static_cast<long>(timeout.count()));
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 2L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, writeCallback);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
}

HttpResult finishRequest(void* handle, int code, ResponseSink* sink, const char* errbuf) {
  CURL* curl = static_cast<CURL*>(handle);
  const auto rc = static_cast<CURLcode>(code);
  HttpResult r;
  if (rc == CURLE_OK) {
    r.transport = HttpResult::Transport::kOk;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = std::move(sink->body);
    return r;
  }
  if (sink->aborted) {
    r.transport = HttpResult::Transport::kAborted;
    return r;
  }
  r.error = errbuf[0] != 0 ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_URL_MALFORMAT: r.transport = HttpResult::Transport::kNotSent; break;
    case CURLE_OPERATION_TIMEDOUT: {
      r.timedOut = true;
      // A timeout before the connection was made is "not sent".
      double connectTime = 0;
      curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME, &connectTime);
      r.transport =
          connectTime > 0 ? HttpResult::Transport::kNoAnswer : HttpResult::Transport::kNotSent;
      break;
    }
    default: r.transport = HttpResult::Transport::kNoAnswer; break;
  }
  return r;
}

HttpClient::HttpClient() {
  initCurl();
  headers_ = newRequestHeaders();
}

HttpClient::~HttpClient() {
  for (void* handle : idle_) {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
  freeRequestHeaders(headers_);
}

void* HttpClient::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::release(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(handle);
}

HttpResult HttpClient::perform(void* handle, const std::string& url, const std::string& body,
                               std::chrono::milliseconds timeout, ResponseSink* sink) {
  if (handle == nullptr) {
    HttpResult r;
    r.transport = HttpResult::Transport::kNotSent;
    r.error = "curl_easy_init failed";
    return r;
  }
  char errbuf[kCurlErrorBytes] = {0};
  prepareRequest(handle, url, body, timeout, headers_, sink, errbuf);
  const CURLcode rc = curl_easy_perform(static_cast<CURL*>(handle));
  return finishRequest(handle, static_cast<int>(rc), sink, errbuf);
}

HttpResult HttpClient::post(const std::string& endpoint, std::string_view path,
                            const std::string& body, std::chrono::milliseconds timeout) {
  void* h = acquire();
  ResponseSink sink;
  HttpResult r = perform(h, urlOf(endpoint, path), body, timeout, &sink);
  release(h);
  return r;
}

HttpResult HttpClient::stream(const std::string& endpoint, std::string_view path,
                              const std::string& body, std::chrono::milliseconds timeout,
                              const std::function<bool(std::string_view)>& onLine) {
  void* h = acquire();
  ResponseSink sink;
  sink.onLine = &onLine;
  HttpResult r = perform(h, urlOf(endpoint, path), body, timeout, &sink);
  release(h);
  return r;
}

}  // namespace resilient::store::etcd
