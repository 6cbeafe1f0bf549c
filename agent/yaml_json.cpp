#include "agent/yaml_json.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <regex>

#include "base/error.h"
#include "base/file_text.h"
#include "base/utf8.h"

#ifdef SURF_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

namespace surf::agent {

namespace {

using Json = nlohmann::ordered_json;

#ifdef SURF_HAVE_YAML_CPP

// A plain scalar typed by the YAML 1.2 core schema.
Json plain_scalar(const std::string& s) {
    static const std::regex null_re("~|null|Null|NULL|");
    static const std::regex true_re("true|True|TRUE"), false_re("false|False|FALSE");
    static const std::regex int_re("[-+]?[0-9]+"), hex_re("0x[0-9a-fA-F]+"), oct_re("0o[0-7]+");
    static const std::regex float_re("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
    static const std::regex inf_re("[-+]?\\.(inf|Inf|INF)"), nan_re("\\.(nan|NaN|NAN)");
    if (std::regex_match(s, null_re)) return nullptr;
    if (std::regex_match(s, true_re)) return true;
    if (std::regex_match(s, false_re)) return false;
    const bool hex = std::regex_match(s, hex_re), oct = std::regex_match(s, oct_re);
    if (hex || oct || std::regex_match(s, int_re)) {
        const size_t skip = hex || oct ? 2 : (s[0] == '+' ? 1 : 0);
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data() + skip, s.data() + s.size(), v,
                                               hex   ? 16
                                               : oct ? 8
                                                     : 10);
        if (ec == std::errc() && end == s.data() + s.size()) return v;
        return std::stod(s);  // beyond 64 bits: a float, as a JSON reader would have it
    }
    if (std::regex_match(s, float_re)) return std::stod(s);
    if (std::regex_match(s, inf_re))
        return s[0] == '-' ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity();
    if (std::regex_match(s, nan_re)) return std::numeric_limits<double>::quiet_NaN();
    return s;
}

std::string at(const std::string& name, const YAML::Mark& mark) {
    return mark.is_null()
               ? name
               : name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Json to_json(const YAML::Node& node, const std::string& name) {
    switch (node.Type()) {
        case YAML::NodeType::Undefined:
        case YAML::NodeType::Null: return nullptr;
        case YAML::NodeType::Scalar:
            // "!" marks a quoted scalar, which is text whatever it spells; so does an explicit !!str.
            if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
            return plain_scalar(node.Scalar());
        case YAML::NodeType::Sequence: {
            Json out = Json::array();
            for (const YAML::Node& item : node) out.push_back(to_json(item, name));
            return out;
        }
        case YAML::NodeType::Map: {
            Json out = Json::object();
            for (const auto& kv : node) {
                if (!kv.first.IsScalar())
                    throw Error(ErrorKind::kFormat, at(name, kv.first.Mark()) + ": a key must be a scalar");
                const std::string key = kv.first.Scalar();
                if (out.contains(key))
                    throw Error(ErrorKind::kFormat,
                                at(name, kv.first.Mark()) + ": key \"" + key + "\" appears twice");
                out[key] = to_json(kv.second, name);
            }
            return out;
        }
    }
    return nullptr;
}

#endif

}  // namespace

bool yaml_supported() {
#ifdef SURF_HAVE_YAML_CPP
    return true;
#else
    return false;
#endif
}

Json parse_yaml(const std::string& text, const std::string& name, std::map<std::string, int>* key_lines) {
#ifdef SURF_HAVE_YAML_CPP
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        throw Error(ErrorKind::kFormat, at(name, e.mark) + ": not valid YAML: " + e.msg);
    }
    if (key_lines && root.IsMap()) {
        for (const auto& kv : root) {
            if (kv.first.IsScalar()) (*key_lines)[kv.first.Scalar()] = kv.first.Mark().line + 1;
        }
    }
    try {
        return to_json(root, name);
    } catch (const YAML::Exception& e) {
        throw Error(ErrorKind::kFormat, at(name, e.mark) + ": " + e.msg);
    }
#else
    (void)text;
    (void)key_lines;
    throw Error(ErrorKind::kUnsupported,
                name + ": this build reads no YAML (built without yaml-cpp); use the JSON form of the file");
#endif
}

bool is_yaml_path(const std::string& path) {
    const std::string lower = surf::ascii_lower(path);
    const auto ends = [&](const std::string& ext) {
        return lower.size() >= ext.size() && lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0;
    };
    return ends(".yaml") || ends(".yml");
}

Json read_json_or_yaml(const std::string& path, std::map<std::string, int>* key_lines) {
    const std::string text = surf::read_text_file(path);
    if (is_yaml_path(path)) return parse_yaml(text, path, key_lines);
    try {
        return Json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(ErrorKind::kFormat, path + ": not valid JSON: " + e.what());
    }
}

}  // namespace surf::agent
