#include "restart/store/etcd/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

namespace resilient::store::etcd {
namespace {

std::once_flag gCurlInit;

// Where a transfer's bytes go: a unary answer is collected; a stream is cut
// into lines for the caller.
struct Sink {
  std::string body;
  std::string partial;
  const std::function<bool(std::string_view)>* onLine = nullptr;
  bool aborted = false;
};

size_t writeCallback(char* data, size_t size, size_t count, void* user) noexcept {
  auto* sink = static_cast<Sink*>(user);
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

HttpClient::HttpClient() {
  std::call_once(gCurlInit, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_slist* h = nullptr;
  h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, "Expect:");  // no 100-continue round trip for large bodies
  headers_ = h;
}

HttpClient::~HttpClient() {
  for (void* handle : idle_) {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
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
                               std::chrono::milliseconds timeout, void* sink) {
  CURL* curl = static_cast<CURL*>(handle);
  HttpResult r;
  if (curl == nullptr) {
    r.transport = HttpResult::Transport::kNotSent;
    r.error = "curl_easy_init failed";
    return r;
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  const long ms = std::max<long>(1, static_cast<long>(timeout.count()));
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POST, 1L);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(headers_));
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
  const CURLcode rc = curl_easy_perform(curl);
  auto* s = static_cast<Sink*>(sink);
  if (rc == CURLE_OK) {
    r.transport = HttpResult::Transport::kOk;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = std::move(s->body);
    return r;
  }
  if (s->aborted) {
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
      // A timeout before the connection was made is "not sent".
      long connectCode = 0;
      curl_easy_getinfo(curl, CURLINFO_HTTP_CONNECTCODE, &connectCode);
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

namespace {
std::string urlOf(const std::string& endpoint, std::string_view path) {
  const bool hasScheme = endpoint.find("://") != std::string::npos;
  return (hasScheme ? endpoint : "http://" + endpoint) + std::string(path);
}
}  // namespace

HttpResult HttpClient::post(const std::string& endpoint, std::string_view path,
                            const std::string& body, std::chrono::milliseconds timeout) {
  void* h = acquire();
  Sink sink;
  HttpResult r = perform(h, urlOf(endpoint, path), body, timeout, &sink);
  release(h);
  return r;
}

HttpResult HttpClient::stream(const std::string& endpoint, std::string_view path,
                              const std::string& body, std::chrono::milliseconds timeout,
                              const std::function<bool(std::string_view)>& onLine) {
  void* h = acquire();
  Sink sink;
  sink.onLine = &onLine;
  HttpResult r = perform(h, urlOf(endpoint, path), body, timeout, &sink);
  release(h);
  return r;
}

}  // namespace resilient::store::etcd
