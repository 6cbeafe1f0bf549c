// Filters, tests, attribute/item access, methods and globals of the Jinja interpreter (jinja.h),
// with jinja2's and Python's semantics. Internal to model/jinja*.cpp.
#pragma once

#include <string>

#include "model/text/jinja_value.h"

namespace surf::model::jinja {

// obj.name: a dict item or a bound method (str.strip, dict.items, ...). Missing → Undefined with a hint.
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: list/str index (negative from the end), dict key. Missing → Undefined with a hint.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string (by code point); null members are passed as Undefined.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);

// Global functions: range, namespace, dict, raise_exception, strftime_now. Undefined when `name` is not one.
Value lookup_global(const std::string& name);

// Python's binary operators (+ - * / // % ** and ~) and `in`.
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// The values a for loop visits: list items, dict keys, string characters; Undefined → none.
ValueList iterate(const Value& v);

// Throws the error a use of an Undefined value raises ("'x' is undefined").
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace surf::model::jinja
