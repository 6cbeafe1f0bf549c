// runtime.js: the part of window.__surfTask that every generated page shares.
// It reads window.__surfTaskConfig (written by the generator), creates window.__surfTask, and gives the
// family scripts helpers for geometry (is an element fully visible and unobstructed?), for turning a
// planned step into an oracle answer (scrolling first when the target is out of view), for wording, and
// for tolerant answer matching (money, dates, names and other text).
(function () {
  "use strict";
  const C = window.__surfTaskConfig;
  const T = (window.__surfTask = { state: JSON.parse(JSON.stringify(C.state || {})), config: C });
  const R = (T.rt = {});

  // ---- small utilities -------------------------------------------------------------------------
  R.hash = function (s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  };
  R.pick = (list, key) => list[R.hash(C.id + "|" + key) % list.length];
  // Fills {name} placeholders; {Name} gives the value with a capital first letter.
  R.fill = (tpl, v) => tpl.replace(/\{(\w+)\}/g, (m, k) => {
    if (v && k in v) return v[k];
    const lk = k.charAt(0).toLowerCase() + k.slice(1);
    return v && typeof v[lk] === "string" ? R.cap(v[lk]) : m;
  });
  R.cap = (s) => (s ? s.charAt(0).toUpperCase() + s.slice(1) : s);
  R.say = (pool, key, v) => R.cap(R.fill(R.pick(pool, key), v || {}));
  R.$ = (sel, root) => (root || document).querySelector(sel);
  R.$$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  R.q = (s) => '"' + s + '"';
  R.esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  R.key = (attr, v) => R.$("[" + attr + '="' + String(v).replace(/["\\]/g, "\\$&") + '"]');
  R.shown = (el) => !!el && el.isConnected && el.getClientRects().length > 0 &&
    getComputedStyle(el).visibility !== "hidden";
  R.stepKey = () => Math.round(scrollY) + "|" + JSON.stringify(T.state);
  R.setStatus = function (el, text, isError) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle("error", !!isError);
  };

  // ---- geometry --------------------------------------------------------------------------------
  // The box a person would click: for a link wrapped over several lines, its largest line box.
  R.box = function (el) {
    const rs = Array.from(el.getClientRects());
    if (rs.length > 1) return rs.reduce((a, b) => (b.width * b.height > a.width * a.height ? b : a));
    return el.getBoundingClientRect();
  };
  R.rect = function (el) {
    const r = R.box(el);
    const f = (v) => Math.round(v * 10) / 10;
    return { x: f(r.left), y: f(r.top), w: f(r.width), h: f(r.height) };
  };
  // Height covered at the top and bottom of the viewport by fixed or stuck chrome ([data-fixed]).
  R.insets = function () {
    let top = 0, bottom = 0;
    for (const el of R.$$("[data-fixed]")) {
      if (!R.shown(el)) continue;
      const r = el.getBoundingClientRect();
      if (r.height <= 0 || r.bottom <= 0 || r.top >= innerHeight) continue;
      if (r.top <= 1 && r.bottom < innerHeight / 2) top = Math.max(top, r.bottom);
      else if (r.bottom >= innerHeight - 1 && r.top > innerHeight / 2) bottom = Math.max(bottom, innerHeight - r.top);
    }
    return { top, bottom };
  };
  R.inView = function (el) {
    if (!R.shown(el)) return false;
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return false;
    const ins = el.closest("[data-fixed]") ? { top: 0, bottom: 0 } : R.insets();
    return r.top >= ins.top - 0.5 && r.bottom <= innerHeight - ins.bottom + 0.5 &&
      r.left >= -0.5 && r.right <= innerWidth + 0.5;
  };
  // True when the centre of el is not covered by another element (an open list, a banner, a dialog).
  R.unobstructed = function (el) {
    const r = R.box(el);
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!hit) return false;
    if (hit === el || el.contains(hit)) return true;
    const lab = hit.closest("label");
    return !!(lab && (lab.control === el || lab.contains(el)));
  };
  R.visible = (el) => R.inView(el) && R.unobstructed(el);
  R.dirTo = function (els) {
    const ins = R.insets();
    for (const el of els) {
      const r = el.getBoundingClientRect();
      if (r.top < ins.top) return "up";
    }
    return "down";
  };

  // ---- turning a planned step into an oracle answer ---------------------------------------------
  const SCROLL_DOWN = [
    "I can't see {seek} yet, so I scroll down to look for it.",
    "{seek} is not on screen; I scroll down.",
    "Nothing matching {seek} is visible here, so I'll scroll down the page.",
    "I need {seek}, which must be further down. Scrolling down.",
    "The visible part of the page does not show {seek}; let me scroll down.",
    "To reach {seek} I scroll the page down.",
  ];
  const SCROLL_UP = [
    "{seek} is above the current view, so I scroll back up.",
    "I need to go back up to reach {seek}.",
    "{seek} has scrolled out of view at the top; scrolling up.",
    "Scrolling up to bring {seek} back into view.",
  ];
  R.scrollFor = function (els, seek) {
    const dir = R.dirTo(els);
    const pool = dir === "up" ? SCROLL_UP : SCROLL_DOWN;
    return { thought: R.say(pool, "scroll|" + R.stepKey(), { seek: seek || "the next control" }), note: "",
      action: { type: "scroll", direction: dir } };
  };
  // it: {type:"click"|"write"|"answer", el, element, content, thought, note, seek, evidence:[els]}
  R.finalize = function (it) {
    if (it.type === "click" || it.type === "write") {
      if (!it.el) throw new Error("oracle: no element for " + it.element);
      if (!R.visible(it.el)) return R.scrollFor([it.el], it.seek || it.element);
      const action = { type: it.type };
      if (it.type === "write") action.content = it.content;
      action.element = it.element;
      return { thought: it.thought, note: it.note || "", action, target: R.rect(it.el) };
    }
    if (it.type === "answer") {
      const ev = (it.evidence || []).filter(Boolean);
      if (ev.length && !ev.every(R.inView)) return R.scrollFor(ev, it.seek);
      return { thought: it.thought, note: it.note || "", action: { type: "answer", content: it.content } };
    }
    throw new Error("oracle: unknown step type " + it.type);
  };

  const PREMATURE = [
    "It looks like the task is already done, so I report success.",
    "Everything requested seems to be in place now; I'll wrap up.",
    "I think I have finished what was asked.",
    "The page looks right to me, so I answer that the task is complete.",
  ];
  // Family scripts set T.plan(opts) (next step as a plan), T.check(answer), T.kind ("action"|"qa"),
  // T.doneAnswer() (action families) and T.wrongAnswer() (qa families).
  T.oracle = function (opts) {
    opts = opts || {};
    if (T.kind === "action") {
      const done = T.check("").success;
      if (done) return R.finalize({ type: "answer", content: T.doneAnswer(), thought: R.say(T.doneThoughts || DONE, "done|" + R.stepKey()) });
      if (opts.mistake) return R.finalize({ type: "answer", content: T.doneAnswer(), thought: R.say(PREMATURE, "early|" + R.stepKey()) });
      return R.finalize(T.plan(opts));
    }
    if (opts.mistake) return R.finalize(Object.assign(T.wrongAnswer(), { evidence: [] }));
    return R.finalize(T.plan(opts));
  };
  const DONE = [
    "The page now shows the requested result, so the task is complete.",
    "That did it; I report what I did.",
    "The change is visible on the page. Done.",
    "Everything the task asked for is in place now.",
  ];

  // ---- answer matching ---------------------------------------------------------------------------
  R.norm = (s) => String(s == null ? "" : s).normalize("NFD").replace(/[\u0300-\u036f]/g, "")
    .toLowerCase().replace(/ø/g, "o").replace(/ß/g, "ss").replace(/[^a-z0-9@]+/g, " ").trim();
  // Whole-word containment of the truth in the answer after normalisation.
  R.matchText = (answer, truth) => {
    const a = " " + R.norm(answer) + " ", t = R.norm(truth);
    return t.length > 0 && a.indexOf(" " + t + " ") >= 0;
  };
  // Every word of a person's name appears in the answer.
  R.matchName = (answer, truth) => {
    const a = " " + R.norm(answer) + " ";
    const parts = R.norm(truth).split(" ").filter(Boolean);
    return parts.length > 0 && parts.every((p) => a.indexOf(" " + p + " ") >= 0);
  };
  // All amounts (in cents) that a text could mean: "$1,299.00", "1.299,00 €", "12,50", "1 299", "14.99".
  R.moneyCandidates = function (s) {
    const out = new Set();
    const text = String(s || "").replace(/[\u00a0\u202f]/g, " ");
    const re = /\d+(?:[.,' ]\d+)*/g;
    let m;
    while ((m = re.exec(text))) {
      const tok = m[0];
      const groups = tok.split(/[.,' ]/);
      const seps = tok.match(/[.,' ]/g) || [];
      const add = (v) => { if (isFinite(v)) out.add(Math.round(v * 100)); };
      if (!seps.length) { add(parseInt(tok, 10)); continue; }
      // Space-separated groups that are not thousands are separate numbers.
      if (seps.includes(" ") && groups.slice(1).some((g, i) => seps[i] === " " && g.length !== 3)) {
        tok.split(" ").forEach((p) => R.moneyCandidates(p).forEach((c) => out.add(c)));
        continue;
      }
      const last = groups[groups.length - 1], lastSep = seps[seps.length - 1];
      const head = groups.slice(0, -1);
      const thousandsOk = (gs) => gs.slice(1).every((g) => g.length === 3);
      if ((lastSep === "." || lastSep === ",") && last.length <= 2) {
        if (head.length === 1 || thousandsOk(head)) add(parseFloat(head.join("") + "." + last));
        else add(parseFloat(groups.slice(0, -1).join("") + "." + last));
      } else if (last.length === 3) {
        if (thousandsOk(groups)) add(parseInt(groups.join(""), 10));
        if (seps.length === 1 && lastSep !== " " && lastSep !== "'") add(parseFloat(groups[0] + "." + last));
      } else {
        groups.forEach((g) => add(parseInt(g, 10)));
      }
    }
    return out;
  };
  R.matchMoney = (answer, cents) => R.moneyCandidates(answer).has(cents);

  const MONTHS = {};
  [["january", "jan", "janvier", "janv", "enero", "ene", "januar", "jänner"],
    ["february", "feb", "fevrier", "fev", "febrero", "februar"],
    ["march", "mar", "mars", "marzo", "marz"],
    ["april", "apr", "avril", "avr", "abril", "abr"],
    ["may", "mai", "mayo"],
    ["june", "jun", "juin", "junio", "juni"],
    ["july", "jul", "juillet", "juil", "julio", "juli"],
    ["august", "aug", "aout", "agosto", "ago"],
    ["september", "sep", "sept", "septembre", "septiembre"],
    ["october", "oct", "octobre", "octubre", "oktober", "okt"],
    ["november", "nov", "novembre", "noviembre"],
    ["december", "dec", "decembre", "diciembre", "dic", "dezember", "dez"]].forEach((names, i) =>
    names.forEach((n) => { MONTHS[n] = i + 1; }));
  // Every (year|null, month, day) a text could mean; dayFirst says how to read 03/04/2025.
  R.dateCandidates = function (s, dayFirst) {
    const out = [];
    const t = R.norm(String(s || "").replace(/(\d)(st|nd|rd|th)\b/gi, "$1"));
    let m;
    const iso = /\b(\d{4}) (\d{1,2}) (\d{1,2})\b/g;
    while ((m = iso.exec(t))) out.push([+m[1], +m[2], +m[3]]);
    const num = /\b(\d{1,2}) (\d{1,2}) (\d{4}|\d{2})\b/g;
    while ((m = num.exec(t))) {
      const y = m[3].length === 2 ? 2000 + +m[3] : +m[3];
      if (dayFirst) out.push([y, +m[2], +m[1]]); else out.push([y, +m[1], +m[2]]);
    }
    const words = t.split(" ");
    for (let i = 0; i < words.length; i++) {
      const mo = MONTHS[words[i]];
      if (!mo) continue;
      let day = null, year = null;
      const near = [words[i - 1], words[i - 2], words[i + 1], words[i + 2]];
      for (const w of near) if (day === null && /^\d{1,2}$/.test(w || "") && +w >= 1 && +w <= 31) day = +w;
      for (const w of [words[i + 1], words[i + 2], words[i + 3]]) if (year === null && /^\d{4}$/.test(w || "")) year = +w;
      if (day !== null) out.push([year, mo, day]);
    }
    return out;
  };
  R.matchDate = (answer, truth, dayFirst, yearShown) => R.dateCandidates(answer, dayFirst).some((c) =>
    c[1] === truth[1] && c[2] === truth[2] && (c[0] === null || !yearShown || c[0] === truth[0]));
  // Dispatches on the kind of value a question asks for.
  R.matchValue = function (answer, spec) {
    if (spec.type === "money") return R.matchMoney(answer, spec.cents);
    if (spec.type === "date") return R.matchDate(answer, spec.ymd, spec.dayFirst, spec.yearShown);
    if (spec.type === "name") return R.matchName(answer, spec.text);
    if (spec.type === "number") return R.moneyCandidates(answer).has(Math.round(spec.value * 100));
    return R.matchText(answer, spec.text);
  };
})();
