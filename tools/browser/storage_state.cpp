// Saving and restoring a session's storage (BrowserSession::storage_state, SessionOptions::storage_state):
// cookies through the Storage domain of the session's browser context, localStorage read from each open tab
// and restored by a script that runs before the page's own on every new document of a saved origin.
#include <map>
#include <random>

#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

namespace surf::tools {

namespace {

// The fields of a CDP Network.Cookie that Storage.setCookies takes back (CookieParam).
nlohmann::json cookie_param(const nlohmann::json& c, const std::string& where) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("value") ||
        !c["value"].is_string() || !c.contains("domain") || !c["domain"].is_string())
        throw Error(ErrorKind::kInvalidArgument, where + ": a cookie needs string name, value and domain");
    nlohmann::json p = {{"name", c["name"]},
                        {"value", c["value"]},
                        {"domain", c["domain"]},
                        {"path", c.value("path", std::string("/"))}};
    for (const char* key : {"httpOnly", "secure"})
        if (c.contains(key) && c[key].is_boolean()) p[key] = c[key];
    if (c.contains("sameSite") && c["sameSite"].is_string()) p["sameSite"] = c["sameSite"];
    // A session cookie has expires -1 (or none); a persistent one keeps its expiry.
    if (c.contains("expires") && c["expires"].is_number() && c["expires"].get<double>() > 0)
        p["expires"] = c["expires"];
    return p;
}

// origin → [[name, value], ...] from storage_state's "origins"; errors name the entry.
std::map<std::string, nlohmann::json> saved_origins(const nlohmann::json& state) {
    std::map<std::string, nlohmann::json> out;
    if (state.is_null() || !state.contains("origins")) return out;
    const nlohmann::json& origins = state["origins"];
    if (!origins.is_array())
        throw Error(ErrorKind::kInvalidArgument, "storage_state.origins: expected an array");
    for (size_t i = 0; i < origins.size(); ++i) {
        const std::string where = "storage_state.origins[" + std::to_string(i) + "]";
        const nlohmann::json& o = origins[i];
        if (!o.is_object() || !o.contains("origin") || !o["origin"].is_string())
            throw Error(ErrorKind::kInvalidArgument, where + ": expected {\"origin\", \"localStorage\"}");
        nlohmann::json items = nlohmann::json::array();
        for (const nlohmann::json& item : o.value("localStorage", nlohmann::json::array())) {
            if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
                !item.contains("value") || !item["value"].is_string())
                throw Error(ErrorKind::kInvalidArgument,
                            where + ".localStorage: items need string name and value");
            items.push_back({item["name"], item["value"]});
        }
        out[o["origin"].get<std::string>()] = items;
    }
    return out;
}

// The localStorage key that marks an origin restored in this session (never saved).
constexpr const char* kRestoredMark = "surf:storage-restored";

// Reads one tab's origin and localStorage (null where the page has none, e.g. about:blank).
const std::string kReadStorage =
    std::string(
        "(() => { try { if (!location.origin || location.origin === 'null') return null;"
        " return {origin: location.origin, items: Object.entries(localStorage)"
        ".filter(([k]) => k !== '") +
    kRestoredMark + "')}; } catch (e) { return null; } })()";

}  // namespace

std::vector<nlohmann::json> storage_cookie_params(const nlohmann::json& state) {
    std::vector<nlohmann::json> out;
    if (state.is_null()) return out;
    if (!state.is_object()) throw Error(ErrorKind::kInvalidArgument, "storage_state: expected an object");
    const nlohmann::json cookies = state.value("cookies", nlohmann::json::array());
    if (!cookies.is_array())
        throw Error(ErrorKind::kInvalidArgument, "storage_state.cookies: expected an array");
    for (size_t i = 0; i < cookies.size(); ++i)
        out.push_back(cookie_param(cookies[i], "storage_state.cookies[" + std::to_string(i) + "]"));
    return out;
}

std::string storage_restore_script(const nlohmann::json& state) {
    if (!state.is_null() && !state.is_object())
        throw Error(ErrorKind::kInvalidArgument, "storage_state: expected an object");
    const std::map<std::string, nlohmann::json> origins = saved_origins(state);
    if (origins.empty()) return "";
    nlohmann::json by_origin = nlohmann::json::object();
    for (const auto& [origin, items] : origins) by_origin[origin] = items;
    // Once per origin and session (localStorage is shared by the session's tabs): a mark holding this
    // session's nonce, so that the page's own later writes are kept and a mark saved by an earlier session
    // does not count.
    std::random_device device;
    const std::string nonce = std::to_string(device()) + std::to_string(device());
    return "(() => { const saved = " + by_origin.dump() +
           "; const items = saved[location.origin]; if (!items) return; try {"
           " const mark = '" +
           std::string(kRestoredMark) + "'; if (localStorage.getItem(mark) === '" + nonce +
           "') return;"
           " for (const [name, value] of items) localStorage.setItem(name, value);"
           " localStorage.setItem(mark, '" +
           nonce + "'); } catch (e) {} })();";
}

nlohmann::json BrowserSession::storage_state() {
    std::lock_guard<std::mutex> action(action_mutex_);
    ensure_ready();
    std::string context;
    std::vector<std::string> tab_sessions;
    {
        std::lock_guard<std::mutex> lock(state_mutex_);
        context = context_id_;
        for (const Tab& t : tabs_) tab_sessions.push_back(t.cdp_session);
    }
    const auto timeout = options_.command_timeout;
    nlohmann::json got = browser_->call("Storage.getCookies", {{"browserContextId", context}}, "", timeout);
    nlohmann::json cookies = nlohmann::json::array();
    for (const nlohmann::json& c : got.value("cookies", nlohmann::json::array()))
        cookies.push_back(cookie_param(c, "Storage.getCookies"));
    std::map<std::string, nlohmann::json> origins = saved_origins(options_.storage_state);
    for (const std::string& sid : tab_sessions) {
        const nlohmann::json r = browser_->call(
            "Runtime.evaluate", {{"expression", kReadStorage}, {"returnByValue", true}}, sid, timeout);
        const nlohmann::json value =
            r.contains("result") ? r["result"].value("value", nlohmann::json()) : nullptr;
        if (value.is_object() && value.contains("origin")) origins[value["origin"]] = value["items"];
    }
    nlohmann::json out_origins = nlohmann::json::array();
    for (const auto& [origin, items] : origins) {
        nlohmann::json list = nlohmann::json::array();
        for (const nlohmann::json& item : items) list.push_back({{"name", item[0]}, {"value", item[1]}});
        out_origins.push_back({{"origin", origin}, {"localStorage", list}});
    }
    return {{"cookies", cookies}, {"origins", out_origins}};
}

}  // namespace surf::tools
