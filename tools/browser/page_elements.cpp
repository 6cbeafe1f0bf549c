#include "tools/browser/page_elements.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tools/browser/browser_session.h"

namespace surf::tools {

namespace {

// Runs in the page. An element is listed when its box lies inside the viewport, it is visible and the point
// at its centre hits it (or its label), and the rules in describe() give it a description. A checkbox or
// radio button whose input is hidden behind a styled label is listed with the label's box.
constexpr const char* kPageElementsJs = R"JS(
(() => {
  const W = innerWidth, H = innerHeight, out = [];
  const clean = s => (s || '').replace(/\s+/g, ' ').trim();
  const short = (s, n) => s.length > 0 && s.length <= (n || 60);
  const cut = s => s.length > 40 ? s.slice(0, 39) + '…' : s;
  // A label's text, or its first line when the whole is long (a title above a description).
  const labelText = l => {
    const t = clean(l.innerText);
    return short(t) ? t : ((l.innerText || '').split('\n').map(clean).find(x => x) || t);
  };
  const labelOf = el => {
    if (el.id) { const l = document.querySelector('label[for="' + CSS.escape(el.id) + '"]'); if (l) return labelText(l); }
    const p = el.closest('label'); if (p) return labelText(p);
    return clean(el.getAttribute('aria-label') || el.getAttribute('title') || '');
  };
  // A checkbox or radio button drawn by the page instead of the browser: the input is invisible or a few
  // pixels wide, and its label (which toggles it when clicked) is what the user sees and clicks.
  const hiddenToggle = label => {
    const c = label.control;
    if (!c || c.tagName !== 'INPUT' || !/^(checkbox|radio)$/.test(c.type)) return null;
    const r = c.getBoundingClientRect(), st = getComputedStyle(c);
    return r.width < 4 || r.height < 4 || st.visibility === 'hidden' || parseFloat(st.opacity) < 0.2 ? c : null;
  };
  // The first other cell of the table row that holds el: a row's name ("Sunridge Scarf"), or "".
  const rowOf = el => {
    const tr = el.closest('tr');
    if (!tr) return '';
    for (const c of tr.cells) { if (c.contains(el)) continue; const t = clean(c.innerText); if (short(t)) return t; }
    return '';
  };
  const field = el => {
    const ph = clean(el.placeholder), l = labelOf(el);
    if (short(l)) return 'the "' + l + '" field';
    if (short(ph)) return 'the field showing "' + ph + '"';
    return '';
  };
  // [description, state, control]
  const describe = el => {
    const tag = el.tagName.toLowerCase(), role = el.getAttribute('role') || '';
    const text = clean(el.innerText || ''), aria = clean(el.getAttribute('aria-label') || el.getAttribute('title') || '');
    if (tag === 'input' || tag === 'textarea') {
      const type = (el.type || 'text').toLowerCase();
      if (type === 'hidden') return null;
      const l = labelOf(el), row = rowOf(el), ticked = el.checked ? 'checked' : 'not checked';
      if (type === 'checkbox') return short(l) ? ['the checkbox next to "' + l + '"', ticked, true] : row ? ['the checkbox in the "' + row + '" row', ticked, true] : null;
      if (type === 'radio') return short(l) ? ['the "' + l + '" radio button', ticked, true] : row ? ['the radio button in the "' + row + '" row', ticked, true] : null;
      if (type === 'submit' || type === 'button') return short(clean(el.value)) ? ['the "' + clean(el.value) + '" button', '', true] : null;
      const d = field(el) || (row ? 'the field in the "' + row + '" row' : '');
      if (!d) return null;
      const v = type === 'password' ? (el.value ? 'filled' : 'empty') : (el.value ? 'value "' + cut(clean(el.value)) + '"' : 'empty');
      return [d, v, true];
    }
    if (tag === 'select') {
      const l = labelOf(el), o = el.options[el.selectedIndex];
      return short(l) ? ['the "' + l + '" dropdown', o ? 'chosen "' + cut(clean(o.text)) + '"' : '', true] : null;
    }
    if (tag === 'button' || role === 'button' || role === 'switch') {
      const name = short(text) ? text : aria;
      const st = el.getAttribute('aria-checked') || el.getAttribute('aria-pressed');
      return short(name) ? ['the "' + name + '" button', st === 'true' ? 'on' : st === 'false' ? 'off' : '', true] : null;
    }
    if (role === 'checkbox') return short(text || aria) ? ['the checkbox next to "' + (text || aria) + '"', el.getAttribute('aria-checked') === 'true' ? 'checked' : 'not checked', true] : null;
    if (role === 'tab') return short(text) ? ['the "' + text + '" tab', el.getAttribute('aria-selected') === 'true' ? 'selected' : '', true] : null;
    if (tag === 'a') return short(text) ? ['the "' + text + '" link', '', true] : (short(aria) ? ['the "' + aria + '" link', '', true] : null);
    if (role === 'option' || role === 'menuitem' || role === 'treeitem')
      return short(text) ? ['the "' + text + '" item', el.getAttribute('aria-selected') === 'true' ? 'selected' : '', true] : null;
    if (/^h[1-4]$/.test(tag)) return short(text) ? ['the "' + text + '" heading', '', false] : null;
    if (el.children.length === 0 && short(text, 80) && text.length >= 2) return ['the text "' + text + '"', '', false];
    // Text mixed with inline elements ("Blue kettle: <b>25 EUR</b>") is one line, so a value keeps its
    // label; the parts inside are then left out (covered). A block holding a control stays split.
    if (ownText(el) && short(text, 80) && text.length >= 2 && !el.querySelector(controls)) {
      covered.add(el);
      return ['the text "' + text + '"', '', false];
    }
    return null;
  };
  const controls = 'button,a,input,textarea,select,[role=button],[role=switch],[role=checkbox],[role=tab],[role=option],[role=menuitem],[role=treeitem]';
  const ownText = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const covered = new Set();
  const inCovered = el => { for (let p = el.parentElement; p; p = p.parentElement) if (covered.has(p)) return true; return false; };
  const sel = controls + ',h1,h2,h3,h4,label,span,td,th,li,p,div,dt,dd,b,strong,em';
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    if (r.width < 4 || r.height < 4 || r.left < 0 || r.top < 0 || r.right > W || r.bottom > H) continue;
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || st.display === 'none' || parseFloat(st.opacity) < 0.2) continue;
    const cx = r.left + r.width / 2, cy = r.top + r.height / 2, hit = document.elementFromPoint(cx, cy);
    if (!hit || !(hit === el || el.contains(hit) || hit.contains(el) && hit.tagName === 'LABEL')) continue;
    if (covered.size && inCovered(el)) continue;
    const toggle = el.tagName === 'LABEL' ? hiddenToggle(el) : null;
    const d = describe(toggle || el);
    if (!d) continue;
    out.push({element: d[0], state: d[1], control: d[2], x: r.left, y: r.top, w: r.width, h: r.height, el});
  }
  // A control whose description repeats ("Add to cart" in every row) says which row it is in.
  const count = {};
  for (const e of out) count[e.element] = (count[e.element] || 0) + 1;
  for (const e of out) {
    const row = e.control && count[e.element] > 1 && !e.element.endsWith(' row') ? rowOf(e.el) : '';
    if (row) e.element += ' in the "' + row + '" row';
    delete e.el;
  }
  return JSON.stringify(out);
})()
)JS";

}  // namespace

std::vector<PageElement> page_elements(BrowserSession& session) {
    const nlohmann::json v = session.evaluate(kPageElementsJs);
    if (!v.is_string()) throw Error(ErrorKind::kBrowser, "page elements: the page returned no list");
    std::vector<PageElement> out;
    try {
        for (const nlohmann::json& e : nlohmann::json::parse(v.get<std::string>())) {
            PageElement p;
            p.description = e.at("element").get<std::string>();
            p.state = e.at("state").get<std::string>();
            p.control = e.at("control").get<bool>();
            p.x = e.at("x").get<double>();
            p.y = e.at("y").get<double>();
            p.width = e.at("w").get<double>();
            p.height = e.at("h").get<double>();
            out.push_back(std::move(p));
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorKind::kBrowser, std::string("page elements: malformed list: ") + e.what());
    }
    return out;
}

}  // namespace surf::tools
