// BrowserSession's form actions: choosing an option of a native <select>. A click cannot do it: the open
// list of a <select> is a popup outside the page, so a click where an option appears in it lands on the
// page underneath, and typing into a <select> changes nothing. The choice is made in the page instead, the
// way a person's choice reaches it: the option becomes selected, then input and change fire.
#include <cmath>

#include "base/error.h"
#include "tools/browser/browser.h"
#include "tools/browser/browser_session.h"

namespace surf::tools {
namespace {

// (x, y, wanted) → the SelectResult fields as a JSON object. The element at the point is looked up through
// open shadow roots and same-origin frames; a <select> is that element, its ancestor, or the control of
// the <label> there. Option texts are compared with whitespace collapsed: exact, then case-insensitive,
// then the one option that starts with the text (case-insensitive).
constexpr const char* kChooseOptionScript = R"JS((x, y, wanted) => {
  let doc = document, px = x, py = y, el = null;
  for (let depth = 0; depth < 8; ++depth) {
    el = doc.elementFromPoint(px, py);
    while (el && el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(px, py);
      if (!inner || inner === el) break;
      el = inner;
    }
    if (!el || (el.tagName !== 'IFRAME' && el.tagName !== 'FRAME')) break;
    let inner = null;
    try { inner = el.contentDocument; } catch (e) {}
    if (!inner) break;
    const r = el.getBoundingClientRect();
    px -= r.left + el.clientLeft;
    py -= r.top + el.clientTop;
    doc = inner;
  }
  const name = e => !e ? 'nothing' : '<' + e.tagName.toLowerCase() + (e.id ? ' id="' + e.id + '"' : '') + '>';
  let sel = el && el.closest ? el.closest('select') : null;
  const label = !sel && el && el.closest ? el.closest('label') : null;
  if (label && label.control && label.control.tagName === 'SELECT') sel = label.control;
  if (!sel) return {found: false, element: name(el)};
  const norm = s => (s || '').replace(/\s+/g, ' ').trim();
  const options = Array.from(sel.options);
  const texts = options.map(o => norm(o.label || o.text));
  const shown = () => sel.selectedIndex >= 0 ? texts[sel.selectedIndex] : '';
  const out = {found: true, element: name(sel), options: texts, previous: shown()};
  const w = norm(wanted), wl = w.toLowerCase();
  const pick = test => texts.map((t, i) => test(t) ? i : -1).filter(i => i >= 0);
  let hits = pick(t => t === w);
  out.match = 'exact';
  if (!hits.length) { hits = pick(t => t.toLowerCase() === wl); out.match = 'case-insensitive'; }
  if (!hits.length && wl) { hits = pick(t => t.toLowerCase().startsWith(wl)); out.match = 'prefix'; }
  if (!hits.length) return Object.assign(out, {match: '', problem: 'no option matches "' + w + '"'});
  if (out.match === 'prefix' && hits.length > 1)
    return Object.assign(out, {match: '', problem: hits.length + ' options start with "' + w + '": "' +
                                                   hits.map(i => texts[i]).join('", "') + '"'});
  const option = options[hits[0]];
  const parent = option.parentElement;
  const group = parent && parent.tagName === 'OPTGROUP' ? parent : null;
  if (sel.disabled) return Object.assign(out, {problem: 'the list is disabled'});
  if (option.disabled || (group && group.disabled))
    return Object.assign(out, {problem: 'the option "' + texts[hits[0]] + '" is disabled'});
  out.chosen = texts[hits[0]];
  out.unchanged = sel.multiple ? options.every(o => o.selected === (o === option)) : option.selected;
  if (!out.unchanged) {
    const view = sel.ownerDocument.defaultView;
    sel.focus();
    if (sel.multiple) for (const o of options) o.selected = o === option;
    else option.selected = true;
    sel.dispatchEvent(new view.Event('input', {bubbles: true, composed: true}));
    sel.dispatchEvent(new view.Event('change', {bubbles: true}));
  }
  out.now = shown();
  return out;
})JS";

std::string text_field(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

SelectResult BrowserSession::select_option(double x, double y, const std::string& option) {
    check_point(x, y, "select");
    std::lock_guard<std::mutex> action(action_mutex_);
    const auto started = std::chrono::steady_clock::now();
    ensure_ready();
    const std::string call =
        std::string("(") + kChooseOptionScript + ")(" + nlohmann::json(x).dump() + ", " +
        nlohmann::json(y).dump() + ", " +
        nlohmann::json(option).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ")";
    const nlohmann::json r = evaluate_locked(call, options_.command_timeout);
    if (!r.is_object()) throw Error(ErrorKind::kBrowser, "select: the page returned " + r.dump());
    SelectResult out;
    out.found = r.value("found", false);
    out.element = text_field(r, "element");
    if (r.contains("options") && r["options"].is_array())
        for (const nlohmann::json& o : r["options"])
            out.options.push_back(o.is_string() ? o.get<std::string>() : "");
    out.previous = text_field(r, "previous");
    out.chosen = text_field(r, "chosen");
    out.match = text_field(r, "match");
    out.problem = text_field(r, "problem");
    out.unchanged = r.value("unchanged", false);
    out.now = text_field(r, "now");
    // A change handler may navigate or open a popup, as after a click.
    if (out.found && out.problem.empty() && !out.unchanged) settle_locked(started, nullptr);
    return out;
}

}  // namespace surf::tools
