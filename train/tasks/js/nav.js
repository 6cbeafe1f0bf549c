// nav.js: search_open, menu_walk and table_page. Views (results, detail, menu levels, table pages) are
// rendered in JS from the config; the oracle reads which view is shown and picks the next click.
(function () {
  "use strict";
  const T = window.__surfTask, R = T.rt, C = T.config, F = C.family;
  const q = R.q, esc = R.esc;
  T.doneAnswer = () => R.pick(C.done, "done|" + R.stepKey());

  if (F === "search_open") {
    T.kind = "action";
    const items = C.items, byKey = {};
    items.forEach((i) => { byKey[i.key] = i; });
    const form = R.$("[data-search]"), box = R.$("[data-q]", form);
    const views = { home: R.$("[data-home]"), results: R.$("[data-results]"), detail: R.$("[data-detail]") };
    const show = (v) => { T.state.view = v; for (const k in views) views[k].classList.toggle("hidden", k !== v); };
    const run = (text) => {
      const ws = R.norm(text).split(" ").filter(Boolean);
      const res = items.filter((it) => ws.length && ws.every((w) => R.norm(it.title + " " + it.snippet).includes(w)));
      T.state.query = text;
      R.$("[data-count]").textContent = String(res.length);
      R.$("[data-qshow]").textContent = "\u201c" + text + "\u201d";
      const link = (it) => '<a href="#" data-open="' + it.key + '" data-desc="' + esc("the " + q(it.title) + " result") + '">' + esc(it.title) + "</a>";
      const list = R.$("[data-list]");
      if (C.variant === "table_results") {
        list.innerHTML = "<table><thead><tr><th>Title</th><th>Details</th></tr></thead><tbody>" + res.map((it) =>
          "<tr><td>" + link(it) + "</td><td class='muted'>" + esc(it.meta) + "</td></tr>").join("") + "</tbody></table>";
      } else {
        const cls = C.variant === "card_results" || C.variant === "grid_tiles" ? "r card" : "r";
        list.innerHTML = res.map((it) => '<div class="' + cls + '">' + link(it) + '<p class="muted">' + esc(it.snippet) +
          '</p><span class="small muted">' + esc(it.meta) + "</span></div>").join("") || "<p>No results.</p>";
      }
      show("results");
    };
    form.addEventListener("submit", (e) => { e.preventDefault(); run(box.value); });
    document.addEventListener("click", (e) => {
      const o = e.target.closest("[data-open]");
      if (o) {
        e.preventDefault();
        const it = byKey[o.dataset.open];
        T.state.opened = it.key;
        R.$("[data-dtitle]").textContent = it.title;
        R.$("[data-dmeta]").textContent = it.meta + " · " + it.snippet;
        show("detail");
        window.scrollTo(0, 0);
        return;
      }
      if (e.target.closest("[data-backres]")) { e.preventDefault(); show(T.state.query === null ? "home" : "results"); }
    });
    T.check = () => {
      if (T.state.view === "detail" && T.state.opened === C.target) return { success: true, reason: "The page of " + q(C.targetTitle) + " is open." };
      if (T.state.view === "detail") return { success: false, reason: "The page of " + q(byKey[T.state.opened].title) + " is open instead of " + q(C.targetTitle) + "." };
      if (T.state.view === "results") return { success: false, reason: "Search results are shown but " + q(C.targetTitle) + " has not been opened." };
      return { success: false, reason: "No search has been run yet." };
    };
    T.plan = () => {
      const v = { query: q(C.query), title: q(C.targetTitle) };
      if (T.state.view === "detail") {
        const b = R.$("[data-backres]");
        return { type: "click", el: b, element: b.dataset.desc, thought: "This page is not " + q(C.targetTitle) + ", so I go back to the results." };
      }
      if (T.state.view === "results" && R.norm(T.state.query) === R.norm(C.query)) {
        const a = R.$('[data-open="' + C.target + '"]', views.results);
        if (a) return { type: "click", el: a, element: a.dataset.desc, seek: "the " + q(C.targetTitle) + " result", thought: R.say([
          "The results for {query} are listed and {title} is among them; I open it.", "I can see {title} in the results. Clicking it.",
          "{title} is the result I need, so I click its title."], "r|" + R.stepKey(), v) };
      }
      return { type: "write", el: box, content: C.query, element: box.dataset.desc, thought: R.say([
        "I use the search box to look for {query}.", "There is a search box; I type {query} and press Enter.",
        "To find {title} I first search for {query}."], "s|" + R.stepKey(), v) };
    };
  }

  if (F === "menu_walk") {
    T.kind = "action";
    const V = C.variant, exclusive = V === "menubar" || V === "mega";
    const parentOf = (k) => k.split(" > ").slice(0, -1).join(" > ");
    const isDesc = (k, anc) => k === anc || k.startsWith(anc + " > ");
    const depth = (k) => k.split(" > ").length;
    const render = () => {
      const st = T.state;
      if (V === "drilldown") {
        R.$$("[data-node]").forEach((n) => n.classList.toggle("hidden", parentOf(n.dataset.node) !== st.level));
        R.$$("[data-sub]").forEach((s) => s.classList.toggle("hidden", !(st.level && isDesc(st.level, s.dataset.sub))));
        R.$$(".mi").forEach((m) => {
          const n = m.querySelector(":scope>[data-node]"), s = m.querySelector(":scope>[data-sub]");
          m.classList.toggle("hidden", n.classList.contains("hidden") && (!s || s.classList.contains("hidden")));
        });
        R.$("[data-back]").classList.toggle("hidden", !st.level);
        R.$("[data-crumb]").textContent = st.level || "";
      } else {
        R.$$("[data-sub]").forEach((s) => s.classList.toggle("hidden", !st.open.includes(s.dataset.sub)));
        const dr = R.$("[data-drawer]");
        if (dr) dr.classList.toggle("hidden", !st.drawer);
      }
      // Flyouts that would leave the viewport are moved back inside it (or shown below their item).
      R.$$(".menu.menubar .lvl1, .menu.mega .lvl1").forEach((s) => { s.style.left = ""; });
      R.$$(".menu.menubar .lvl2").forEach((s) => s.classList.remove("below"));
      R.$$(".menu.menubar .lvl1:not(.hidden), .menu.mega .lvl1:not(.hidden)").forEach((s) => {
        const r = s.getBoundingClientRect();
        if (r.right > innerWidth - 2) s.style.left = Math.min(0, -(r.right - innerWidth + 6)) + "px";
      });
      R.$$(".menu.menubar .lvl2:not(.hidden)").forEach((s) => {
        if (s.getBoundingClientRect().right > innerWidth - 2) s.classList.add("below");
      });
    };
    const toggle = (k) => {
      const open = T.state.open;
      if (open.includes(k)) T.state.open = open.filter((x) => !isDesc(x, k));
      else T.state.open = (exclusive ? open.filter((x) => isDesc(k, x)) : open.slice()).concat([k]);
    };
    const showPage = (k) => {
      R.$("[data-ptitle]").textContent = k.split(" > ").pop();
      R.$("[data-pcrumbs]").textContent = k.split(" > ").join(" › ");
    };
    document.addEventListener("click", (e) => {
      const t = e.target;
      if (t.closest("[data-drawer-toggle]")) { T.state.drawer = !T.state.drawer; render(); return; }
      if (t.closest("[data-back]")) { e.preventDefault(); T.state.level = parentOf(T.state.level); render(); return; }
      const n = t.closest("[data-node]");
      if (n) {
        e.preventDefault();
        const k = n.dataset.node;
        if (n.hasAttribute("data-leaf")) {
          T.state.page = k;
          if (exclusive) T.state.open = [];
          if (V === "drawer") { T.state.drawer = false; T.state.open = []; }
          R.$$(".mn.sel").forEach((x) => x.classList.remove("sel"));
          n.classList.add("sel");
          showPage(k);
        } else if (V === "drilldown") T.state.level = k;
        else toggle(k);
        render();
        return;
      }
      if (exclusive && !t.closest("[data-menu]") && T.state.open.length) { T.state.open = []; render(); }
    });
    render();
    const isOpen = (k) => T.state.open.includes(k) || (V === "mega" && depth(k) === 2 && T.state.open.includes(parentOf(k))) ||
      (V === "drilldown" && !!T.state.level && isDesc(T.state.level, k));
    T.check = () => {
      if (T.state.page === C.target) return { success: true, reason: "The " + C.target + " page is open." };
      if (T.state.page) return { success: false, reason: "The " + T.state.page + " page is open instead of " + C.target + "." };
      return { success: false, reason: "No page has been opened from the menu yet." };
    };
    T.plan = () => {
      const path = C.path;
      for (let i = 0; i < path.length; i++) {
        const k = path.slice(0, i + 1).join(" > ");
        const last = i === path.length - 1;
        if (!last && isOpen(k)) continue;
        const el = R.key("data-node", k);
        if (el && R.shown(el)) {
          if (R.inView(el) && !R.unobstructed(el) && T.state.open.length) {
            const top = R.key("data-node", T.state.open[0]);
            return { type: "click", el: top, element: top.dataset.desc, thought: "An open menu covers the item I need, so I close it first." };
          }
          const v = { label: q(path[i]), target: C.target, next: q(path[Math.min(i + 1, path.length - 1)]) };
          const pool = last ? ["{label} is visible now, so I click it to open {target}.", "The last step: {label}.",
            "I can see {label} in the menu; clicking it."]
            : ["To reach {target} I open {label} first.", "{label} holds the next level; I open it to find {next}.",
              "I click {label} to expand it."];
          return { type: "click", el, element: el.dataset.desc, thought: R.say(pool, "m|" + R.stepKey(), v) };
        }
        if (V === "drawer" && !T.state.drawer) {
          const b = R.$("[data-drawer-toggle]");
          return { type: "click", el: b, element: b.dataset.desc, thought: "The navigation is hidden behind the menu button, so I open it." };
        }
        if (V === "drilldown") {
          const b = R.$("[data-back]");
          return { type: "click", el: b, element: b.dataset.desc, thought: "This list is not on the way to " + C.target + "; I go back one level." };
        }
        throw new Error("menu_walk: no way to reach " + k);
      }
      throw new Error("menu_walk: nothing to do");
    };
  }

  if (F === "table_page") {
    T.kind = C.mode === "qa" ? "qa" : "action";
    const tbody = R.$("[data-tbody]"), pager = R.$("[data-pager]");
    const per = C.perPage, N = C.pages, V = C.variant;
    const pg = (val, text, desc, extra) => '<a href="#" class="pg ' + (extra || "") + '" data-pg="' + val + '" data-desc="' + esc(desc) + '">' + esc(text) + "</a>";
    const render = () => {
      const p = T.state.page;
      tbody.innerHTML = C.rows.slice((p - 1) * per, p * per).map((r, i) => '<tr data-row="' + ((p - 1) * per + i) + '">' +
        r.map((c, j) => '<td data-c="' + j + '">' + esc(c) + "</td>").join("") + "</tr>").join("");
      const nums = () => Array.from({ length: N }, (_, i) => pg(i + 1, String(i + 1), "the " + q(String(i + 1)) + " page link below the table", i + 1 === p ? "cur" : "")).join("");
      const off = (c) => (c ? "off" : "");
      let h;
      if (V === "numbers") h = pg("prev", "‹ Previous", 'the "‹ Previous" link below the table', off(p === 1)) + nums() + pg("next", "Next ›", 'the "Next ›" link below the table', off(p === N));
      else if (V === "prevnext") h = pg("prev", "Previous", 'the "Previous" button below the table', off(p === 1)) + '<span class="muted">Page ' + p + " of " + N + "</span>" + pg("next", "Next", 'the "Next" button below the table', off(p === N));
      else if (V === "numbers_only") h = nums();
      else if (V === "arrows") h = pg("first", "«", 'the "«" first-page arrow', off(p === 1)) + pg("prev", "‹", 'the "‹" previous-page arrow', off(p === 1)) + nums() +
        pg("next", "›", 'the "›" next-page arrow', off(p === N)) + pg("last", "»", 'the "»" last-page arrow', off(p === N));
      else h = '<span class="muted">Showing ' + ((p - 1) * per + 1) + "–" + Math.min(p * per, C.rows.length) + " of " + C.rows.length + "</span>" +
        pg("prev", "Previous page", 'the "Previous page" link', off(p === 1)) + pg("next", "Next page", 'the "Next page" link', off(p === N));
      pager.innerHTML = h;
    };
    document.addEventListener("click", (e) => {
      const a = e.target.closest("[data-pg]");
      if (!a) return;
      e.preventDefault();
      const v = a.dataset.pg, p = T.state.page;
      const n = v === "prev" ? p - 1 : v === "next" ? p + 1 : v === "first" ? 1 : v === "last" ? N : parseInt(v, 10);
      if (n >= 1 && n <= N && n !== p) { T.state.page = n; render(); }
    });
    render();
    const pgEl = (v) => R.$('[data-pg="' + v + '"]', pager);
    const move = (goal, why) => {
      const p = T.state.page;
      const dir = goal > p ? "next" : "prev";
      const el = (C.mode === "goto" && pgEl(goal)) || pgEl(dir) || pgEl(goal > p ? p + 1 : p - 1);
      return { type: "click", el, element: el.dataset.desc, seek: el.dataset.desc, thought: why };
    };
    const sentence = (val, key) => R.say(["The {col} of {row} is {val}.", "{row} has {col} {val}.", "{val} is the {col} listed for {row}.",
      "According to the table, the {col} for {row} is {val}."], key, { col: C.colLabel && C.colLabel.toLowerCase(), row: C.rowLabel, val: val });
    if (C.mode === "qa") {
      const tp = Math.floor(C.targetRow / per) + 1;
      T.check = (answer) => {
        if (R.matchValue(answer, C.truth)) return { success: true, reason: "The answer gives " + C.truth.display + ", the " + C.colLabel.toLowerCase() + " of " + C.rowLabel + "." };
        return { success: false, reason: (String(answer || "").trim() ? "The answer does not match" : "No answer was given for") +
          " the " + C.colLabel.toLowerCase() + " of " + C.rowLabel + ", which the table shows as " + C.truth.display + "." };
      };
      T.plan = () => {
        const p = T.state.page;
        if (p === tp) {
          const row = R.$('[data-row="' + C.targetRow + '"]');
          const val = C.truth.type === "date" && C.spoken && R.hash(R.stepKey()) % 3 === 0 ? C.spoken : C.truth.display;
          const s = sentence(val, "a|" + R.stepKey());
          return { type: "answer", content: s, note: sentence(C.truth.display, "n"), evidence: [row.children[0], row.children[C.col]],
            seek: "the row of " + C.rowLabel, thought: R.say(["I found {row} on page {p}; its {col} is shown in the row.",
              "{row} is on this page, so I can read the answer.", "The row for {row} is visible and gives the {col}."], "t|" + R.stepKey(),
            { row: C.rowLabel, p: p, col: C.colLabel.toLowerCase() }) };
        }
        return move(tp, R.say(["{row} is not on page {p}; I go to the {dir} page.", "No row for {row} here, so I move to the {dir} page.",
          "Page {p} does not list {row}. Checking the {dir} page."], "mv|" + R.stepKey(), { row: C.rowLabel, p: p, dir: tp > p ? "next" : "previous" }));
      };
      T.wrongAnswer = () => {
        const p = T.state.page;
        const cand = C.rows.map((r, i) => i).filter((i) => i !== C.targetRow && !R.matchValue(C.rows[i][C.col], C.truth));
        const onPage = cand.filter((i) => Math.floor(i / per) + 1 === p);
        const vis = onPage.filter((i) => { const r = R.$('[data-row="' + i + '"]'); return r && R.inView(r); });
        const pool = vis.length ? vis : onPage.length ? onPage : cand;
        const i = pool[R.hash(R.stepKey()) % pool.length];
        const s = sentence(C.rows[i][C.col], "w|" + R.stepKey());
        return { type: "answer", content: s, note: s, thought: "I read the " + C.colLabel.toLowerCase() + " from the table row I can see." };
      };
    } else {
      T.check = () => (T.state.page === C.goal ? { success: true, reason: "Page " + C.goal + " of the table is shown." }
        : { success: false, reason: "The table shows page " + T.state.page + ", not page " + C.goal + "." });
      T.plan = () => move(C.goal, R.say(["The table is on page {p}; I need page {g}.", "I move towards page {g} using the pagination below the table.",
        "Page {p} is shown, so I go on to page {g}."], "g|" + R.stepKey(), { p: T.state.page, g: C.goal }));
    }
  }
})();
