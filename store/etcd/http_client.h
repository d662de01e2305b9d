// HTTP/1.1 POSTs to etcd's JSON gateway over libcurl. Easy handles are pooled
// (each keeps its keep-alive connections), so concurrent calls from several
// threads each use their own handle. No exceptions cross libcurl's callbacks.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace resilient::store::etcd {

struct HttpResult {
  enum class Transport {
    kOk,        // an HTTP answer arrived (any status)
    kNotSent,   // could not connect: the request certainly did not reach the member
    kNoAnswer,  // sent, or maybe sent, but no complete answer (reset, timeout)
    kAborted,   // the stream callback asked to stop
  };
  Transport transport = Transport::kNoAnswer;
  bool timedOut = false;  // the attempt ran out of time (the member may be there, but slow)
  long status = 0;    // HTTP status when kOk
  std::string body;   // the answer's body (unary calls)
  std::string error;  // libcurl's description when not kOk
};

// Where a transfer's bytes go: a unary answer is collected in `body`; a
// stream is cut into lines for `onLine`, which returns false to end it.
struct ResponseSink {
  std::string body;
  std::string partial;
  const std::function<bool(std::string_view)>* onLine = nullptr;
  bool aborted = false;
};

// The pieces of one request, shared by HttpClient (curl_easy_perform) and
// callers that drive libcurl's multi interface themselves (the benchmark's
// event-driven load driver), so both send the same requests the same way.
inline constexpr size_t kCurlErrorBytes = 256;  // CURL_ERROR_SIZE
void initCurl();                                // curl_global_init, once
std::string urlOf(const std::string& endpoint, std::string_view path);
void* newRequestHeaders();  // a curl_slist* for prepareRequest
void freeRequestHeaders(void* headers);
// Sets `handle` (a CURL*) up for a POST of `body` to `url`; `body`, `headers`,
// `sink` and `errbuf` (kCurlErrorBytes) must outlive the transfer.
void prepareRequest(void* handle, const std::string& url, const std::string& body,
                    std::chrono::milliseconds timeout, void* headers, ResponseSink* sink,
                    char* errbuf);
// The outcome of a transfer that ended with `code` (a CURLcode).
HttpResult finishRequest(void* handle, int code, ResponseSink* sink, const char* errbuf);

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` (JSON) to http://endpoint/path; the whole exchange within `timeout`.
  HttpResult post(const std::string& endpoint, std::string_view path, const std::string& body,
                  std::chrono::milliseconds timeout);

  // A streaming POST: `onLine` gets each newline-terminated line of the
  // answer as it arrives and returns false to end the stream (kAborted).
  HttpResult stream(const std::string& endpoint, std::string_view path, const std::string& body,
                    std::chrono::milliseconds timeout,
                    const std::function<bool(std::string_view)>& onLine);

 private:
  void* acquire();
  void release(void* handle);
  HttpResult perform(void* handle, const std::string& url, const std::string& body,
                     std::chrono::milliseconds timeout, ResponseSink* sink);

  std::mutex mu_;
  std::vector<void*> idle_;  // CURL*
  void* headers_ = nullptr;  // curl_slist*
};

}  // namespace resilient::store::etcd
