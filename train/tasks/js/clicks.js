// clicks.js: click_button, click_link, click_tab and click_icon.
// Elements with data-act are the candidates; a click records the key in state.activated and shows the
// element's effect (a status line, a selected tab, a "page" view for links, a toggled icon).
(function () {
  "use strict";
  const T = window.__surfTask, R = T.rt, C = T.config;
  T.kind = "action";
  T.state.activated = T.state.activated || [];
  const F = C.family;

  function selectTab(key) {
    T.state.selected = key;
    for (const t of R.$$("[data-tab]")) {
      const on = t.dataset.act === key;
      t.classList.toggle("active", on);
      t.setAttribute("aria-selected", on ? "true" : "false");
    }
    for (const p of R.$$("[data-panel]")) p.classList.toggle("hidden", p.dataset.panel !== key);
  }
  function openView(key, el) {
    T.state.view = key;
    const home = R.$("[data-home]"), view = R.$("[data-view]");
    if (home && view && home.contains(el)) home.classList.add("hidden");
    if (view) {
      view.classList.remove("hidden");
      R.$("[data-vtitle]", view).textContent = el.textContent.trim();
    }
    if (view && !(home && home.contains(el))) view.scrollIntoView({ block: "start" });
  }
  document.addEventListener("click", (e) => {
    const back = e.target.closest("[data-back]");
    if (back) {
      e.preventDefault();
      T.state.view = null;
      R.$("[data-view]").classList.add("hidden");
      R.$("[data-home]").classList.remove("hidden");
      return;
    }
    const el = e.target.closest("[data-act]");
    if (!el) return;
    e.preventDefault();
    const key = el.dataset.act;
    T.state.activated.push(key);
    if (el.hasAttribute("data-tab")) selectTab(key);
    else if (el.hasAttribute("data-link")) openView(key, el);
    else {
      if (el.hasAttribute("data-toggle")) el.classList.toggle("on");
      const card = el.closest(".card") || document;
      R.setStatus(R.$("[data-status]", card) || R.$("[data-status]"), el.dataset.msg || "Done.");
    }
  });

  function labelOf(key) {
    const el = R.key("data-act", key);
    if (!el) return R.q(key);
    if (F === "click_icon") return "the " + el.getAttribute("aria-label") + " icon";
    return R.q(el.textContent.trim());
  }
  T.check = function () {
    const tgt = C.target, acts = T.state.activated;
    const what = { click_button: "button", click_link: "link", click_tab: "tab", click_icon: "icon button" }[F];
    const name = F === "click_icon" ? "the " + C.label + " icon" : R.q(C.label) + " " + what;
    if (F === "click_tab") {
      if (T.state.selected === tgt) return { success: true, reason: "The " + R.q(C.label) + " tab is selected." };
      return { success: false, reason: "The " + labelOf(T.state.selected) + " tab is selected, not " + R.q(C.label) + "." };
    }
    if (acts.includes(tgt)) return { success: true, reason: "The " + name + " was clicked." };
    if (acts.length) return { success: false, reason: labelOf(acts[acts.length - 1]) + " was clicked instead of the " + name + "." };
    return { success: false, reason: "The " + name + " has not been clicked yet." };
  };
  T.doneAnswer = () => R.pick(C.done, "done|" + R.stepKey());

  const THOUGHTS = {
    click_button: [
      "The task asks for {el}, and I can see it on the page, so I click it.",
      "Several buttons are visible; {el} is the one I need.",
      "I see {el} among the other actions. Clicking it.",
      "{el} is right there, so I press it.",
      "There are look-alike buttons here, but {el} matches the task exactly."],
    click_link: [
      "I can see {el}; clicking it opens the page I need.",
      "The link I'm looking for is visible: {el}.",
      "{el} is on screen, so I follow it.",
      "Among the links shown, {el} is the requested one."],
    click_tab: [
      "The tab bar is visible and {el} is not selected yet, so I click it.",
      "Another tab is open right now; I switch to {el}.",
      "I need {el}, which I can see in the row of tabs.",
      "{el} is visible but inactive. Clicking it."],
    click_icon: [
      "The toolbar has several icons; {el} is the one for this action.",
      "I recognise {el}, which does what the task asks. Clicking it.",
      "Looking at the icons, {el} matches the request.",
      "{el} is visible, so I click it."],
  };
  T.plan = function () {
    const el = R.key("data-act", C.target);
    if (F === "click_link" && !R.shown(el)) {
      const back = R.$("[data-back]");
      return { type: "click", el: back, element: back.dataset.desc,
        thought: R.say(["Another page is open and the link I need is not on it, so I go back.",
          "This is not the page with {label}; I click Back first."], R.stepKey(), { label: R.q(C.label) }) };
    }
    return { type: "click", el, element: el.dataset.desc, seek: el.dataset.desc,
      thought: R.say(THOUGHTS[F], "plan|" + R.stepKey(), { el: el.dataset.desc }) };
  };
})();
