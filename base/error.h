// Bad input (tier two of the two error tiers, DESIGN.md §2 rule 8): a typed error that names the
// offending file, field or value. Thrown inside model/tools/agent and caught at the API boundary
// (CLI, library API) or turned into an observation for the agent. Never thrown from a kernel.
#pragma once

#include <stdexcept>
#include <string>

namespace surf {

enum class ErrorKind {
    kIo,                 // a file could not be opened / read / written
    kFormat,             // a file's contents are malformed (checkpoint, JSON, image)
    kConfig,             // a config is missing a field or is inconsistent
    kInvalidArgument,    // a caller passed a bad value (CLI flag, API argument)
    kUnsupported,        // a well-formed input that surf does not support (e.g. an unknown architecture)
    kModelOutput,        // the model produced output that does not parse
    kBrowser,            // the browser crashed, hung or refused a command
    kNavigationDenied,   // a URL outside the allow-list
    kTimeout,            // an operation ran past its deadline
    kCancelled,          // the caller cancelled the operation
    kResourceExhausted,  // no room (memory, state slots) for the request
    kUnavailable         // a remote service cannot be reached or keeps failing (an environment problem)
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const { return kind_; }

private:
    ErrorKind kind_;
};

}  // namespace surf
