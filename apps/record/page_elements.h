// JavaScript that lists the visible, unobstructed elements of the page a person could point at, each with
// a description in the words the policy uses ("the \"Sign in\" button", "the \"Email\" field") and its
// box in CSS pixels of the viewport. `surf record` asks the localizer for some of them on every
// screenshot, so grounding examples come from every page, not only from the demonstrated actions.
#pragma once

namespace surf::record {

inline constexpr const char* kPageElementsJs = R"JS(
(() => {
  const W = innerWidth, H = innerHeight, out = [], seen = new Map();
  const clean = s => (s || '').replace(/\s+/g, ' ').trim();
  const short = s => s.length > 0 && s.length <= 60;
  const labelOf = el => {
    if (el.id) { const l = document.querySelector('label[for="' + CSS.escape(el.id) + '"]'); if (l) return clean(l.innerText); }
    const p = el.closest('label'); if (p) return clean(p.innerText);
    return clean(el.getAttribute('aria-label') || el.getAttribute('title') || '');
  };
  const describe = el => {
    const tag = el.tagName.toLowerCase(), role = el.getAttribute('role') || '';
    const text = clean(el.innerText || el.value || ''), aria = clean(el.getAttribute('aria-label') || el.getAttribute('title') || '');
    if (tag === 'input' || tag === 'textarea') {
      const type = (el.type || 'text').toLowerCase();
      if (type === 'checkbox') { const l = labelOf(el); return short(l) ? 'the checkbox next to "' + l + '"' : ''; }
      if (type === 'radio') { const l = labelOf(el); return short(l) ? 'the "' + l + '" radio button' : ''; }
      if (type === 'submit' || type === 'button') return short(clean(el.value)) ? 'the "' + clean(el.value) + '" button' : '';
      const ph = clean(el.placeholder), l = labelOf(el);
      if (short(l)) return 'the "' + l + '" field';
      if (short(ph)) return 'the field showing "' + ph + '"';
      return '';
    }
    if (tag === 'button' || role === 'button') return short(text) ? 'the "' + text + '" button' : (short(aria) ? 'the "' + aria + '" button' : '');
    if (role === 'tab') return short(text) ? 'the "' + text + '" tab' : '';
    if (tag === 'a') return short(text) ? 'the "' + text + '" link' : (short(aria) ? 'the "' + aria + '" link' : '');
    if (role === 'option' || role === 'menuitem' || role === 'treeitem') return short(text) ? 'the "' + text + '" item' : '';
    if (/^h[1-4]$/.test(tag)) return short(text) ? 'the "' + text + '" heading' : '';
    if (el.children.length === 0 && short(text) && text.length >= 2) return 'the text "' + text + '"';
    return '';
  };
  const sel = 'button,a,input,textarea,[role=button],[role=tab],[role=option],[role=menuitem],[role=treeitem],h1,h2,h3,h4,label,span,td,th,li,p,div';
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    if (r.width < 4 || r.height < 4 || r.left < 0 || r.top < 0 || r.right > W || r.bottom > H) continue;
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || st.display === 'none' || parseFloat(st.opacity) < 0.2) continue;
    const cx = r.left + r.width / 2, cy = r.top + r.height / 2, hit = document.elementFromPoint(cx, cy);
    if (!hit || !(hit === el || el.contains(hit) || hit.contains(el) && hit.tagName === 'LABEL')) continue;
    const d = describe(el);
    if (!d) continue;
    seen.set(d, (seen.get(d) || 0) + 1);
    out.push({element: d, x: r.left, y: r.top, w: r.width, h: r.height});
  }
  return JSON.stringify(out.filter(e => seen.get(e.element) === 1));
})()
)JS";

}  // namespace surf::record
