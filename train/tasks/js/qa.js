// qa.js: qa_price, qa_date and qa_name. The page is static; the oracle scrolls until the item that
// answers the question is in view, then answers with the value shown there. check() compares the answer
// to the truth with tolerant matching (money, dates, names, text) from runtime.js.
(function () {
  "use strict";
  const T = window.__surfTask, R = T.rt, C = T.config;
  T.kind = "qa";
  const item = (k) => R.key("data-item", k);
  const field = (it, f) => R.$('[data-f="' + f + '"]', it);
  const vars = (val) => ({ desc: C.desc, val: val, role: C.role, name: C.name });

  T.check = function (answer) {
    const a = String(answer || "").trim();
    const truth = C.truth.display;
    if (a && R.matchValue(a, C.truth)) return { success: true, reason: "The answer gives " + truth + " for " + C.desc + ", as the page shows." };
    if (!a) return { success: false, reason: "No answer was given; the page shows " + truth + " for " + C.desc + "." };
    const wrong = (C.distractors || []).find((d) => R.matchValue(a, d));
    if (wrong) return { success: false, reason: "The answer gives " + wrong.display + " but the page shows " + truth + " for " + C.desc + "." };
    return { success: false, reason: "The answer does not contain " + truth + ", which the page shows for " + C.desc + "." };
  };

  T.plan = function () {
    const it = item(C.target);
    const nameEl = field(it, "name"), valEl = field(it, "value");
    const useSpoken = C.truth.type === "date" && C.spoken && R.hash(R.stepKey() + "s") % 3 === 0;
    const val = useSpoken ? C.spoken : C.truth.display;
    const note = R.cap(R.fill(C.note, vars(C.truth.display)));
    return { type: "answer", content: R.say(C.answers, "a|" + R.stepKey(), vars(val)), note: note,
      evidence: [nameEl, valEl], seek: C.desc,
      thought: R.say(["I can see {desc} on the page, so I can answer.", "{Desc} is listed here with the value I need.",
        "Found {desc}; the answer is shown right next to it.", "The entry for {desc} is visible now."], "t|" + R.stepKey(), vars(val)) };
  };

  // A wrong answer from a distractor, preferring one that is visible on screen right now.
  T.wrongAnswer = function () {
    const others = R.$$("[data-item]").filter((x) => x.dataset.item !== C.target);
    const withVal = others.map((x) => ({ el: x, v: field(x, "value") })).filter((o) => o.v && !R.matchValue(o.v.textContent, C.truth));
    const vis = withVal.filter((o) => R.inView(o.v));
    const pool = vis.length ? vis : withVal;
    const pick = pool[R.hash("w|" + R.stepKey()) % pool.length];
    const val = pick.v.textContent.trim();
    const content = R.say(C.answers, "wa|" + R.stepKey(), vars(val));
    return { type: "answer", content: content, note: R.cap(R.fill(C.note, vars(val))),
      thought: R.say(["I think I found {desc}; I report the value next to it.", "This looks like the entry for {desc}."], "wt|" + R.stepKey(), vars(val)) };
  };
})();
