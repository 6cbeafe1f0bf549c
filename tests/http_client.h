// A blocking HTTP client for tests of surf serve (libcurl; only tests that link the agent layer use it).
#pragma once

#include <curl/curl.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace surf::test {

struct HttpReply {
    long status = 0;
    std::string body;
    std::string content_type;
};

// One request (`body` is sent for POST); fails the test when no reply comes (connection refused, timeout).
inline HttpReply http_request(const std::string& method, const std::string& url, const std::string& body = "",
                              const std::vector<std::string>& headers = {}) {
    CURL* c = curl_easy_init();
    HttpReply r;
    curl_slist* h = nullptr;
    for (const auto& x : headers) h = curl_slist_append(h, x.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(
        c, CURLOPT_WRITEFUNCTION, +[](char* d, size_t, size_t n, void* u) -> size_t {
            static_cast<std::string*>(u)->append(d, n);
            return n;
        });
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    char* ct = nullptr;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ct) r.content_type = ct;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    REQUIRE_MESSAGE(rc == CURLE_OK, method, " ", url, ": ", curl_easy_strerror(rc));
    return r;
}

}  // namespace surf::test
