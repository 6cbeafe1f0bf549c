// forms.js: type_submit, checkbox, radio, dropdown, listbox and login.
// Each family section wires the page's controls (Enter moves on or submits, never loses text), keeps the
// task state in window.__surfTask.state, and defines check() and plan() from the live DOM.
(function () {
  "use strict";
  const T = window.__surfTask, R = T.rt, C = T.config, F = C.family;
  T.kind = "action";
  const status = () => R.$("[data-status]");
  const q = R.q;
  T.doneAnswer = () => R.pick(C.done, "done|" + R.stepKey());
  const hit = (k) => R.key("data-hit", k);
  const saveBtn = () => R.$("[data-save]");
  const clickSave = (why) => {
    const b = saveBtn();
    return { type: "click", el: b, element: b.dataset.desc, thought: R.say([
      "{why} Now I click {btn} to save it.", "{why} The last step is {btn}.",
      "{why} I still have to press {btn} so the change is kept."], "save|" + R.stepKey(), { why: why, btn: b.dataset.desc }) };
  };
  document.addEventListener("click", (e) => {
    const b = e.target.closest("[data-save]");
    if (!b) return;
    T.state.saved = T.snapshot();
    R.setStatus(status(), R.pick(["Your changes have been saved.", "Saved.", "Settings updated.", "Preferences saved."], "saved"));
  });

  if (F === "type_submit") {
    const form = R.$("[data-form]");
    const inputs = R.$$("input[data-field]", form);
    const btn = R.$("[data-submit]", form);
    const submit = () => {
      const missing = inputs.filter((i) => i.hasAttribute("data-required") && !i.value.trim());
      if (missing.length) {
        T.state.errors = (T.state.errors || 0) + 1;
        R.setStatus(status(), "Please fill in " + missing[0].dataset.label + ".", true);
        return;
      }
      const vals = {};
      inputs.forEach((i) => { vals[i.dataset.field] = i.value; });
      T.state.submitted = vals;
      R.setStatus(status(), R.pick(["Thanks! Your details were saved.", "Form submitted successfully.",
        "Thank you, we received your request.", "All set: the form was sent."], "ok"));
    };
    if (C.mode === "enter") form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
    else {
      form.addEventListener("keydown", (e) => {
        if (e.key !== "Enter" || !e.target.matches("input")) return;
        e.preventDefault();
        const i = inputs.indexOf(e.target);
        if (i >= 0 && i + 1 < inputs.length) inputs[i + 1].focus();
      });
      btn.addEventListener("click", submit);
    }
    T.snapshot = () => null;
    T.check = () => {
      const s = T.state.submitted;
      if (!s) return { success: false, reason: "The form has not been submitted yet." };
      const got = String(s[C.field] || "").trim().replace(/\s+/g, " ");
      if (got === C.value) return { success: true, reason: "The form was submitted with " + q(C.value) + " in " + q(C.field) + "." };
      return { success: false, reason: "The " + q(C.field) + " field was submitted as " + q(got) + " instead of " + q(C.value) + "." };
    };
    T.plan = () => {
      const inp = inputs.find((i) => i.dataset.field === C.field);
      const v = { field: q(C.field), value: q(C.value), old: q(inp.value), btn: btn.dataset.desc };
      if (inp.value !== C.value) {
        const pool = inp.value ? ["The {field} field currently holds {old}; I replace it with {value}.",
          "{field} has the wrong value, so I overwrite it with {value}."]
          : ["The {field} field is empty, so I type {value} into it.", "I fill {field} with {value}.",
            "The form is visible; {field} needs {value}."];
        return { type: "write", el: inp, content: C.value, element: inp.dataset.desc, thought: R.say(pool, "w|" + R.stepKey(), v) };
      }
      return { type: "click", el: btn, element: btn.dataset.desc, thought: R.say([
        "{field} now contains {value}, but the form has not been sent; I click {btn}.",
        "The value is in place. Submitting with {btn}.", "Pressing Enter did not send the form, so I use {btn}."], "c|" + R.stepKey(), v) };
    };
  }

  if (F === "checkbox") {
    const boxes = () => R.$$("input[data-cb]");
    const live = () => { const o = {}; boxes().forEach((c) => { o[c.dataset.cb] = c.checked; }); return o; };
    T.snapshot = live;
    document.addEventListener("change", (e) => { if (e.target.matches("input[data-cb]")) T.state.boxes = live(); });
    T.check = () => {
      const s = C.needSave ? T.state.saved : live();
      if (!s) return { success: false, reason: "The changes have not been saved yet." };
      const where = C.needSave ? " in the saved settings" : "";
      for (const k of Object.keys(C.desired)) {
        if (s[k] !== C.desired[k]) return { success: false, reason: "The " + q(k) + " box is still " + (C.desired[k] ? "unticked" : "ticked") + where + "." };
      }
      for (const k of Object.keys(C.initial)) {
        if (!(k in C.desired) && s[k] !== C.initial[k]) return { success: false, reason: "The " + q(k) + " box was changed but should have been left alone." };
      }
      return { success: true, reason: "The requested boxes are set" + (C.needSave ? " and saved." : " and the others are unchanged.") };
    };
    T.plan = () => {
      const s = live();
      for (const k of C.order || Object.keys(C.desired)) {
        if (s[k] !== C.desired[k]) {
          const el = hit(k);
          const pool = C.desired[k] ? ["{label} is still unticked, so I tick it.", "I need {label} on; it is off right now.",
            "The option {label} is not selected yet. Clicking {el}."]
            : ["{label} is ticked but should not be, so I untick it.", "I turn off {label}, which is currently on.",
              "{label} has to be cleared; I click {el}."];
          return { type: "click", el, element: el.dataset.desc, thought: R.say(pool, "t|" + k + R.stepKey(), { label: q(k), el: el.dataset.desc }) };
        }
      }
      for (const k of Object.keys(C.initial)) {
        if (!(k in C.desired) && s[k] !== C.initial[k]) {
          const el = hit(k);
          return { type: "click", el, element: el.dataset.desc, thought: "I changed " + q(k) + " by mistake, so I set it back." };
        }
      }
      return clickSave("All the boxes are set as requested.");
    };
  }

  if (F === "radio") {
    const checkedIn = (g) => { const r = R.$$("input[data-rg]").find((i) => i.dataset.rg === g && i.checked); return r ? r.value : null; };
    T.snapshot = () => ({ value: checkedIn(C.group) });
    document.addEventListener("change", (e) => {
      if (e.target.matches("input[data-rg]")) (T.state.radios = T.state.radios || {})[e.target.dataset.rg] = e.target.value;
    });
    T.check = () => {
      const v = C.needSave ? (T.state.saved && T.state.saved.value) : checkedIn(C.group);
      if (v === C.option) return { success: true, reason: q(C.option) + " is selected under " + q(C.group) + (C.needSave ? " and saved." : ".") };
      if (C.needSave && !T.state.saved) return { success: false, reason: "The choice has not been saved with " + q(C.saveLabel) + " yet." };
      return { success: false, reason: (v ? q(v) : "Nothing") + " is selected under " + q(C.group) + ", not " + q(C.option) + "." };
    };
    T.plan = () => {
      const cur = checkedIn(C.group);
      if (cur !== C.option) {
        const el = hit(C.group + "|" + C.option);
        return { type: "click", el, element: el.dataset.desc, thought: R.say([
          "{group} is set to {cur}; I select {opt} instead.", "I can see the {group} options. {opt} is the one to choose.",
          "To pick {opt} for {group} I click its radio button."], "r|" + R.stepKey(), { group: q(C.group), cur: cur ? q(cur) : "nothing", opt: q(C.option) }) };
      }
      return clickSave(q(C.option) + " is selected.");
    };
  }

  if (F === "dropdown") {
    const dds = R.$$("[data-dd]");
    const ddOf = (n) => dds.find((d) => d.dataset.dd === n);
    const list = (d) => R.$(".ddl", d);
    const closeAll = () => { dds.forEach((d) => list(d).classList.add("hidden")); T.state.open = null; };
    T.snapshot = () => ({ value: ddOf(C.dd).dataset.value });
    document.addEventListener("click", (e) => {
      const b = e.target.closest("[data-ddbtn]");
      if (b) {
        const d = b.closest("[data-dd]");
        const opening = list(d).classList.contains("hidden");
        closeAll();
        if (opening) {
          list(d).classList.remove("hidden");
          T.state.open = d.dataset.dd;
          R.$$("[data-ddopt]", d).forEach((o) => o.classList.toggle("sel", o.dataset.ddopt === d.dataset.value));
        }
        return;
      }
      const o = e.target.closest("[data-ddopt]");
      if (o) {
        const d = o.closest("[data-dd]");
        d.dataset.value = o.dataset.ddopt;
        R.$("[data-ddval]", d).textContent = d.dataset.fmt === "pill" ? d.dataset.dd + ": " + o.dataset.ddopt : o.dataset.ddopt;
        (T.state.values = T.state.values || {})[d.dataset.dd] = o.dataset.ddopt;
        closeAll();
        return;
      }
      if (!e.target.closest(".ddl")) closeAll();
    });
    T.check = () => {
      const v = C.needSave ? (T.state.saved && T.state.saved.value) : ddOf(C.dd).dataset.value;
      if (v === C.option) return { success: true, reason: q(C.dd) + " is set to " + q(C.option) + (C.needSave ? " and saved." : ".") };
      if (C.needSave && !T.state.saved) return { success: false, reason: "The setting has not been saved with " + q(C.saveLabel) + " yet." };
      return { success: false, reason: q(C.dd) + " shows " + q(v) + " instead of " + q(C.option) + "." };
    };
    T.plan = () => {
      const d = ddOf(C.dd), btn = R.$("[data-ddbtn]", d);
      const v = { dd: q(C.dd), opt: q(C.option), cur: q(d.dataset.value) };
      if (T.state.open && T.state.open !== C.dd) {
        const ob = R.$("[data-ddbtn]", ddOf(T.state.open));
        return { type: "click", el: ob, element: ob.dataset.desc, thought: "The " + q(T.state.open) + " list is open and may cover other controls, so I close it first." };
      }
      if (d.dataset.value === C.option) {
        if (T.state.open) return { type: "click", el: btn, element: btn.dataset.desc, thought: "The value is right; I close the open list." };
        return clickSave(q(C.dd) + " shows " + q(C.option) + ".");
      }
      if (T.state.open === C.dd) {
        const o = R.$$("[data-ddopt]", d).find((x) => x.dataset.ddopt === C.option);
        return { type: "click", el: o, element: o.dataset.desc, seek: "the " + q(C.option) + " option in the open list",
          thought: R.say(["The {dd} list is open; I choose {opt}.", "I can see the options now. Clicking {opt}.",
            "{opt} is in the open list, so I click it."], "o|" + R.stepKey(), v) };
      }
      return { type: "click", el: btn, element: btn.dataset.desc, thought: R.say([
        "{dd} currently shows {cur}. I open the dropdown to change it.", "To set {dd} I first open its dropdown.",
        "The {dd} dropdown is closed; clicking it shows the options."], "b|" + R.stepKey(), v) };
    };
  }

  if (F === "listbox") {
    const lbOf = (n) => R.$$("[data-lb]").find((l) => l.dataset.lb === n);
    const selected = (n) => { const o = R.$('[aria-selected="true"]', lbOf(n)); return o ? o.dataset.lbo : null; };
    T.snapshot = () => ({ value: selected(C.lb) });
    document.addEventListener("click", (e) => {
      const o = e.target.closest("[data-lbo]");
      if (!o) return;
      const lb = o.closest("[data-lb]");
      R.$$("[data-lbo]", lb).forEach((x) => x.setAttribute("aria-selected", x === o ? "true" : "false"));
      (T.state.sel = T.state.sel || {})[lb.dataset.lb] = o.dataset.lbo;
      const det = R.$$("[data-detail]").find((x) => x.dataset.detail === lb.dataset.lb);
      if (det) det.textContent = o.dataset.lbo;
    });
    T.check = () => {
      const v = C.needSave ? (T.state.saved && T.state.saved.value) : selected(C.lb);
      if (v === C.option) return { success: true, reason: q(C.option) + " is selected in the " + q(C.lb) + " list" + (C.needSave ? " and confirmed." : ".") };
      if (C.needSave && !T.state.saved) return { success: false, reason: "The selection has not been confirmed with " + q(C.saveLabel) + " yet." };
      return { success: false, reason: (v ? q(v) : "Nothing") + " is selected in " + q(C.lb) + ", not " + q(C.option) + "." };
    };
    T.plan = () => {
      if (selected(C.lb) !== C.option) {
        const el = R.$$("[data-lbo]", lbOf(C.lb)).find((x) => x.dataset.lbo === C.option);
        return { type: "click", el, element: el.dataset.desc, thought: R.say([
          "The {lb} list is visible and {opt} is not selected yet; I click it.", "I pick {opt} in the {lb} list.",
          "{opt} appears in the {lb} list, so I select it."], "l|" + R.stepKey(), { lb: q(C.lb), opt: q(C.option) }) };
      }
      return clickSave(q(C.option) + " is highlighted.");
    };
  }

  if (F === "login") {
    const form = R.$("[data-loginform]");
    const u = R.$('[data-login="user"]'), p = R.$('[data-login="pass"]');
    const signin = R.$("[data-signin]"), next = R.$("[data-next]"), change = R.$("[data-change]");
    T.snapshot = () => null;
    T.state.step = C.twoStep ? 1 : 0;
    const step = (n) => {
      T.state.step = n;
      R.$$("[data-step]").forEach((s) => s.classList.toggle("hidden", s.dataset.step !== String(n)));
      if (n === 2) { R.$("[data-whoami]").textContent = u.value.trim(); p.focus(); } else u.focus();
    };
    const attempt = () => {
      if (!u.value.trim()) { R.setStatus(status(), "Please enter your username.", true); u.focus(); return; }
      if (!p.value) { R.setStatus(status(), "Please enter your password.", true); p.focus(); return; }
      if (u.value.trim() === C.user && p.value === C.password) {
        T.state.loggedIn = true;
        T.state.user = u.value.trim();
        R.$("[data-loginview]").classList.add("hidden");
        R.$("[data-welcome]").classList.remove("hidden");
        R.$("[data-uname]").textContent = T.state.user;
        window.scrollTo(0, 0);
      } else {
        T.state.failures += 1;
        p.value = "";
        R.setStatus(status(), "Incorrect username or password.", true);
      }
    };
    const goNext = () => {
      if (!u.value.trim()) { R.setStatus(status(), "Enter your username to continue.", true); return; }
      R.setStatus(status(), "");
      step(2);
    };
    form.addEventListener("submit", (e) => { e.preventDefault(); attempt(); });
    u.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      if (C.twoStep) goNext();
      else if (!p.value) { p.focus(); R.setStatus(status(), "Now enter your password."); } else attempt();
    });
    if (next) next.addEventListener("click", goNext);
    if (change) change.addEventListener("click", (e) => { e.preventDefault(); step(1); });
    T.check = () => {
      if (T.state.loggedIn && T.state.user === C.user) return { success: true, reason: "The user is logged in as " + C.user + "." };
      if (T.state.loggedIn) return { success: false, reason: "Logged in as " + T.state.user + " instead of " + C.user + "." };
      if (T.state.failures) return { success: false, reason: "The login failed: wrong credentials were submitted." };
      return { success: false, reason: "The user is not logged in yet." };
    };
    const v = { user: q(C.user) };
    const writeU = () => ({ type: "write", el: u, content: C.user, element: u.dataset.desc, thought: R.say(u.value ? [
      "The username field holds the wrong value; I replace it with {user}."] : [
      "The login form is shown and the username field is empty, so I type {user}.", "I start by entering the username {user}.",
      "First the account name: {user}."], "u|" + R.stepKey(), v) });
    const writeP = () => ({ type: "write", el: p, content: C.password, element: p.dataset.desc, thought: R.say([
      "The username is filled in; now I type the password.", "Next comes the password field.",
      "I enter the password, and Enter will submit the form."], "p|" + R.stepKey(), v) });
    T.plan = () => {
      if (C.twoStep) {
        if (T.state.step === 1) {
          if (u.value.trim() !== C.user) return writeU();
          return { type: "click", el: next, element: next.dataset.desc, thought: "The username is entered; I continue to the password step." };
        }
        if (R.$("[data-whoami]").textContent !== C.user) {
          return { type: "click", el: change, element: change.dataset.desc, thought: "The account shown is not " + q(C.user) + ", so I go back and change it." };
        }
        if (p.value !== C.password) return writeP();
      } else {
        if (u.value.trim() !== C.user) return writeU();
        if (p.value !== C.password) return writeP();
      }
      return { type: "click", el: signin, element: signin.dataset.desc, thought: "Both fields are filled in, so I click " + signin.dataset.desc + "." };
    };
  }
})();
