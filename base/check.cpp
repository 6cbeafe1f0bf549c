#include "base/check.h"

#include <cstdio>
#include <cstdlib>

#include "base/error.h"

namespace surf {

namespace detail {

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
    std::fprintf(stderr, "surf: internal check failed at %s:%d: %s%s%s\n", file, line, condition,
                 message.empty() ? "" : ": ", message.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace detail

const char* error_kind_name(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::kIo: return "io";
        case ErrorKind::kFormat: return "format";
        case ErrorKind::kConfig: return "config";
        case ErrorKind::kInvalidArgument: return "invalid_argument";
        case ErrorKind::kUnsupported: return "unsupported";
        case ErrorKind::kModelOutput: return "model_output";
        case ErrorKind::kBrowser: return "browser";
        case ErrorKind::kNavigationDenied: return "navigation_denied";
        case ErrorKind::kTimeout: return "timeout";
        case ErrorKind::kCancelled: return "cancelled";
        case ErrorKind::kResourceExhausted: return "resource_exhausted";
        case ErrorKind::kUnavailable: return "unavailable";
    }
    return "unknown";
}

}  // namespace surf
