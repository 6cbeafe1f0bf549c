"""Families type_submit, checkbox, radio, dropdown, listbox and login (forms and selection controls).

Controls carry data attributes that js/forms.js reads: data-field/data-label for text inputs,
data-cb for checkboxes, data-rg for radios, data-dd/data-ddbtn/data-ddopt for custom dropdowns,
data-lb/data-lbo for listboxes, data-hit on the element a person clicks, data-desc for its description.
"""
import words
from common import attrs, esc, person, q, username, password
from phrasing import THEN_SAVE, checkbox_changes


CHECKBOX_WORDS = sorted({x for g in words.CHECKBOX_SETS for x in g})
RADIO_WORDS = sorted({x for g in words.RADIO_GROUPS.values() for x in g})
DROPDOWN_WORDS = sorted({x for g in words.DROPDOWNS.values() for x in g})


def field_value(rng, kind, site, nv=None):
    """A plausible value for a text field of `kind`; invented words when the task has a Novel `nv`."""
    if nv is not None:
        v = nv.text(kind)
        if v is not None:
            return v
    name = person(rng)
    first, last = name.lower().split()[0], name.lower().split()[-1]
    first = first.encode("ascii", "ignore").decode() or "sam"
    last = last.encode("ascii", "ignore").decode() or "lee"
    return {
        "email": "%s.%s@%s.com" % (first, last, rng.choice(["example", "mail", site.lower()])),
        "name": name, "city": rng.choice(words.CITIES), "company": "%s %s" % (site, rng.choice(["Ltd", "GmbH", "Inc.", "Studio", "Labs"])),
        "phone": "+%d %d %04d %04d" % (rng.choice([1, 33, 44, 49, 34]), rng.randint(10, 99), rng.randint(0, 9999), rng.randint(0, 9999)),
        "code": "%s%d" % (rng.choice(["SPRING", "WELCOME", "SAVE", "VIP", "FALL", "HELLO"]), rng.randint(5, 50)),
        "url": "https://%s.example.com" % site.lower(), "job": rng.choice(words.JOBS),
        "handle": "%s_%s%d" % (first, last[:3], rng.randint(1, 99)), "zip": "%05d" % rng.randint(1000, 99999),
        "order": "A-%d" % rng.randint(10000, 99999), "subject": rng.choice(words.SUBJECTS),
        "project": rng.choice(words.PROJECTS), "message": rng.choice(words.MESSAGES),
        "tracking": "1Z%dAB%d" % (rng.randint(100, 999), rng.randint(100000, 999999)),
        "street": "%d %s" % (rng.randint(1, 220), rng.choice(words.STREETS)),
    }[kind]


def _save_label(ctx, choices):
    """The label of a form's save button: one of `choices`, or an invented one when the task has a Novel."""
    if ctx.novel:
        return ctx.theme.label(ctx.novel.mix(1, choices, p_real=0.3)[0])
    return ctx.theme.label(ctx.rng.choice(choices))


def _save_button(th, label, key="save"):
    return '<button type="button" class="btn"%s>%s</button>' % (attrs(data_save=key, data_desc="the %s button" % q(label)), esc(label))


def build_type_submit(ctx):
    rng, th, nv = ctx.rng, ctx.theme, ctx.novel
    variant = ctx.variant(["contact_form", "inline_single", "settings_form", "checkout_fields"], ["placeholder_only", "wizard_card"])
    n = 1 if variant == "inline_single" else rng.randint(2, 5 if ctx.size != "small" else 3)
    specs = rng.sample(words.TEXT_FIELDS, n)
    if nv:  # most fields get an invented label (a real placeholder would not fit it)
        specs = [(nv.field_label(kind), nv.rng.choice(["", ph]), kind) if nv.rng.random() < 0.75 else (lab, ph, kind)
                 for lab, ph, kind in specs]
    seen, fields = set(), []
    for lab, ph, kind in specs:
        if lab.lower() in seen:
            continue
        seen.add(lab.lower())
        fields.append((th.label(lab) if variant == "placeholder_only" else lab, ph, kind))
    ti = rng.randrange(len(fields))
    tlab, tph, tkind = fields[ti]
    value = field_value(rng, tkind, ctx.site, nv)
    mode = rng.choice(["enter", "enter", "button"])
    btn_label = th.label(rng.choice({"inline_single": ["Subscribe", "Apply", "Go", "Send", "Redeem"],
                                     "wizard_card": ["Continue", "Next step", "Save and continue"]}.get(variant, ["Submit", "Send", "Save changes", "Update", "Save"])))
    rows = []
    for i, (lab, ph, kind) in enumerate(fields):
        val = "" if i == ti or rng.random() < 0.4 else field_value(rng, kind, ctx.site, nv)
        if i == ti and rng.random() < 0.3:
            val = field_value(rng, kind, ctx.site, nv)  # an old value to replace
        if variant == "placeholder_only":
            val = "" if i == ti else val
        required = (i != ti and val and rng.random() < 0.5) or (i == ti and rng.random() < 0.5)
        itype = {"email": "email", "phone": "tel", "url": "text"}.get(kind, "text")
        desc = "the %s field" % q(lab) if variant != "placeholder_only" else "the input showing %s" % q(lab)
        inp = '<input type="%s"%s>' % (itype, attrs(data_field=lab, data_label=lab, value=val or None, data_required=bool(required),
                                                     placeholder=(lab if variant == "placeholder_only" else (ph or None)), data_desc=desc,
                                                     autocomplete="off"))
        star = ' <b style="color:#c0392b">*</b>' if required and variant != "placeholder_only" else ""
        if variant == "settings_form":
            rows.append('<div class="grow2"><label><span>%s%s</span></label>%s</div>' % (esc(lab), star, inp))
        elif variant == "placeholder_only":
            rows.append('<div class="field">%s</div>' % inp)
        elif variant == "inline_single":
            rows.append('<label class="field" style="flex:1;margin:0"><span>%s%s</span>%s</label>' % (esc(lab), star, inp))
        else:
            rows.append('<label class="field"><span>%s%s</span>%s</label>' % (esc(lab), star, inp))
    btn = '<button type="%s" class="btn"%s>%s</button>' % ("submit" if mode == "enter" else "button",
                                                          attrs(data_submit=True, data_desc="the %s button" % q(btn_label)), esc(btn_label))
    tag = "form" if mode == "enter" else "div"
    status = '<div class="status" data-status role="status"></div>'
    if variant == "inline_single":
        body = '<div class="row" style="align-items:flex-end">%s%s</div>' % ("".join(rows), btn)
    elif variant == "checkout_fields":
        half = max(1, len(rows) // 2)
        body = "<h3>%s</h3>%s<h3>%s</h3>%s%s" % (esc(rng.choice(["Contact", "Your details", "Account"])), "".join(rows[:half]),
                                               esc(rng.choice(["Delivery", "Extras", "More"])), "".join(rows[half:]), btn)
    elif variant == "wizard_card":
        body = '<p class="muted small">Step %d of %d</p>%s%s' % (rng.randint(1, 2), 3, "".join(rows), btn)
    else:
        body = "".join(rows) + btn
    main = '<%s class="card" data-form%s>%s%s</%s>' % (tag, attrs(data_mode=mode, novalidate=tag == "form"), status, body, tag)
    css = ".grow2{display:grid;grid-template-columns:minmax(90px,180px) 1fr;gap:.8em;align-items:center;margin-bottom:.7em}"
    title = rng.choice({"inline_single": ["Newsletter", "Have a code?", "Stay in touch", "Quick update"]}.get(
        variant, ["Contact us", "Your details", "Edit profile", "Checkout", "Account settings", "Get in touch"]))
    return dict(kind="action", ques=ctx.phrase("type_submit", value=q(value), field=q(tlab)), main=main, js="forms", css=css,
                steps=2, state=dict(submitted=None),
                config=dict(field=tlab, value=value, mode=mode,
                            done=["I entered %s in %s and submitted the form." % (q(value), q(tlab)),
                                  "Submitted the form with %s set to %s." % (tlab, q(value))]),
                opts=dict(title=title, intro=rng.choice(["", "Fields marked * are required.", " ".join(rng.sample(words.FILLER_SENTENCES, 1))])))


def build_checkbox(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["native_list", "switches", "custom_boxes", "filters_side"], ["settings_cards", "table_checks"])
    labels = ctx.novel.mix(7, CHECKBOX_WORDS) if ctx.novel else rng.choice(words.CHECKBOX_SETS)[:]
    rng.shuffle(labels)
    labels = labels[:rng.randint(4, len(labels))] if ctx.size != "small" else labels[:rng.randint(3, 5)]
    init = {lab: rng.random() < 0.45 for lab in labels}
    k = rng.randint(1, min(3, len(labels)))
    targets = rng.sample(labels, k)
    desired = {t: not init[t] for t in targets}
    need_save = rng.random() < 0.4
    save_label = _save_label(ctx, ["Save preferences", "Save", "Apply", "Update settings", "Save changes"])
    items = []
    for lab in labels:
        key = lab
        chk = " checked" if init[lab] else ""
        sub = esc(rng.choice(words.FILLER_SENTENCES)) if variant == "settings_cards" else ""
        if variant in ("native_list", "filters_side"):
            items.append('<label class="opt"><input type="checkbox"%s%s><span>%s</span></label>' % (
                attrs(data_cb=key, data_hit=key, data_desc="the checkbox next to %s" % q(lab)), chk, esc(lab)))
        elif variant == "switches":
            items.append('<label class="opt srow"><span>%s</span><input type="checkbox" class="vh"%s%s><span class="switch"%s></span></label>' % (
                esc(lab), attrs(data_cb=key), chk, attrs(data_hit=key, data_desc="the %s toggle switch" % q(lab))))
        elif variant == "custom_boxes":
            items.append('<label class="opt"><input type="checkbox" class="vh"%s%s><span class="box"%s></span><span>%s</span></label>' % (
                attrs(data_cb=key), chk, attrs(data_hit=key, data_desc="the box next to %s" % q(lab)), esc(lab)))
        elif variant == "settings_cards":
            items.append('<div class="card" style="margin-bottom:.6em"><label class="opt srow"><span><b>%s</b><br><span class="muted small">%s</span></span>'
                         '<input type="checkbox"%s%s></label></div>' % (esc(lab), sub, attrs(data_cb=key, data_hit=key, data_desc="the checkbox for %s" % q(lab)), chk))
        else:
            items.append('<tr><td>%s</td><td><input type="checkbox"%s%s></td></tr>' % (
                esc(lab), attrs(data_cb=key, data_hit=key, data_desc="the checkbox in the %s row" % q(lab)), chk))
    if variant == "table_checks":
        body = '<table><thead><tr><th>%s</th><th>%s</th></tr></thead><tbody>%s</tbody></table>' % (
            esc(rng.choice(["Option", "Setting", "Feature"])), esc(rng.choice(["Enabled", "On", "Active"])), "".join(items))
    else:
        body = "".join(items)
    heading = rng.choice(["Preferences", "Notifications", "Filters", "Options", "Privacy", "Amenities"])
    status = '<div class="status" data-status role="status"></div>'
    save = ('<div style="margin-top:.8em">%s</div>' % _save_button(th, save_label)) if need_save else ""
    if variant == "filters_side" and ctx.vp[0] >= 700:
        prods = "".join('<div class="card"><b>%s</b><p class="muted small">%s</p></div>' % (esc(words.MODEL_WORDS[i] + " " + t.title()), "In stock")
                        for i, t in enumerate(rng.sample(words.PRODUCT_TYPES, 4)))
        main = '<div class="row" style="align-items:flex-start;flex-wrap:nowrap"><div class="card" style="width:230px;flex:none"><h4>%s</h4>%s%s%s</div><div class="pgrid">%s</div></div>' % (
            esc(heading), body, save, status, prods)
    else:
        main = '<div class="card"><h3>%s</h3>%s%s%s</div>' % (esc(heading), status, body, save)
    tick = [t for t in targets if desired[t]]
    untick = [t for t in targets if not desired[t]]
    changes = checkbox_changes(rng, ctx.split, ctx.lang, tick, untick)
    if need_save:
        changes += THEN_SAVE[ctx.lang].format(save=q(save_label))
    css = (".srow{display:flex;justify-content:space-between;gap:1em;padding:.45em 0;border-bottom:1px solid var(--border)}"
           ".pgrid{flex:1;min-width:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(160px,1fr));gap:.8em}")
    parts = []
    if tick:
        parts.append("ticked " + ", ".join(q(t) for t in tick))
    if untick:
        parts.append("unticked " + ", ".join(q(t) for t in untick))
    done = "I " + " and ".join(parts) + (" and saved." if need_save else "; the other options are unchanged.")
    return dict(kind="action", ques=ctx.phrase("checkbox", changes=changes), main=main, js="forms", css=css,
                steps=len(targets) + (1 if need_save else 0), state=dict(saved=None),
                config=dict(desired=desired, order=targets, initial=init, needSave=need_save, saveLabel=save_label, done=[done]),
                opts=dict(title=rng.choice(["Settings", "Account", "Search filters", "Your preferences", ""]), avoid=labels + [save_label]))


def build_radio(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["native_groups", "radio_cards", "inline_radios", "segmented"], ["table_radio", "list_dots"])
    ng = 1 if ctx.size == "small" else rng.randint(1, 3)
    nv = ctx.novel
    rgroups = {nv.group_name(): nv.mix(nv.rng.randint(3, 5), RADIO_WORDS) for _ in range(3)} if nv else words.RADIO_GROUPS
    groups = rng.sample(sorted(rgroups), ng)
    tg = rng.choice(groups)
    opts_t = rgroups[tg]
    initial = {g: (rng.choice(rgroups[g]) if rng.random() < 0.8 else None) for g in groups}
    target = rng.choice([o for o in opts_t if o != initial[tg]])
    need_save = rng.random() < 0.3
    save_label = _save_label(ctx, ["Continue", "Save", "Confirm", "Apply"])
    blocks = []
    for gi, g in enumerate(groups):
        items = []
        for o in rgroups[g]:
            chk = " checked" if initial[g] == o else ""
            desc = "the %s option under %s" % (q(o), q(g))
            a_in = attrs(name="g%d" % gi, value=o, data_rg=g)
            if variant in ("native_groups", "inline_radios"):
                items.append('<label class="opt"><input type="radio"%s%s%s><span>%s</span></label>' % (
                    a_in, attrs(data_hit=g + "|" + o, data_desc=desc.replace("option", "radio button")), chk, esc(o)))
            elif variant == "radio_cards":
                items.append('<label class="opt rcard"><input type="radio" class="vh"%s%s><span class="dot"%s></span><span><b>%s</b><br><span class="muted small">%s</span></span></label>' % (
                    a_in, chk, attrs(data_hit=g + "|" + o, data_desc=desc), esc(o), esc(rng.choice(["Recommended", "Most popular", "Flexible", "Best value", "Included"]))))
            elif variant == "segmented":
                items.append('<label class="seg"><input type="radio" class="vh"%s%s><span%s>%s</span></label>' % (
                    a_in, chk, attrs(data_hit=g + "|" + o, data_desc="the %s button under %s" % (q(o), q(g))), esc(o)))
            elif variant == "table_radio":
                items.append('<tr><td><input type="radio"%s%s%s></td><td>%s</td><td class="muted">%s</td></tr>' % (
                    a_in, attrs(data_hit=g + "|" + o, data_desc="the radio button in the %s row of %s" % (q(o), q(g))), chk, esc(o),
                    esc(rng.choice(["Free", "+$4.99", "+$9.00", "Included", "-"]))))
            else:
                items.append('<label class="opt srow"><span>%s</span><input type="radio" class="vh"%s%s><span class="dot"%s></span></label>' % (
                    esc(o), a_in, chk, attrs(data_hit=g + "|" + o, data_desc=desc)))
        inner = "".join(items)
        if variant == "table_radio":
            inner = "<table><tbody>%s</tbody></table>" % inner
        elif variant in ("inline_radios", "segmented", "radio_cards"):
            inner = '<div class="%s">%s</div>' % ("segw" if variant == "segmented" else "row", inner)
        blocks.append('<fieldset class="rg"><legend>%s</legend>%s</fieldset>' % (esc(g), inner))
    save = ('<div style="margin-top:.8em">%s</div>' % _save_button(th, save_label)) if need_save else ""
    main = '<div class="card"><div class="status" data-status role="status"></div>%s%s</div>' % ("".join(blocks), save)
    css = (".rg{border:0;padding:0;margin:0 0 1em}.rg legend{font-weight:700;margin-bottom:.3em}"
           ".rcard{border:1px solid var(--border);border-radius:var(--radius);padding:.6em .8em;min-width:150px}"
           ".segw{display:inline-flex;flex-wrap:wrap;border:1px solid var(--brand);border-radius:var(--btn-radius);overflow:hidden}"
           ".seg span{display:inline-block;padding:.4em .9em;cursor:pointer;border-right:1px solid var(--border)}"
           ".seg input:checked+span{background:var(--brand);color:var(--on-brand)}"
           ".srow{display:flex;justify-content:space-between;gap:1em;padding:.45em 0;border-bottom:1px solid var(--border)}")
    ques = ctx.phrase("radio", option=q(target), group=q(tg))
    if need_save:
        ques = ques.rstrip(".") + THEN_SAVE[ctx.lang].format(save=q(save_label)) + "."
    return dict(kind="action", ques=ques, main=main, js="forms", css=css, steps=1 + need_save, state=dict(saved=None),
                config=dict(group=tg, option=target, needSave=need_save, saveLabel=save_label,
                            done=["I selected %s under %s%s." % (q(target), q(tg), " and saved" if need_save else ""),
                                  "%s is now set to %s." % (tg, q(target))]),
                opts=dict(title=rng.choice(["Checkout", "Your plan", "Preferences", "Options", ""]), avoid=[save_label]))


def build_dropdown(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["labeled_above", "filter_bar", "form_grid", "settings_rows"], ["pill_chips", "caption_below"])
    nd = 1 if ctx.size == "small" else rng.randint(1, 4)
    nv = ctx.novel
    dds = {nv.group_name(): nv.mix(nv.rng.randint(4, 10), DROPDOWN_WORDS) for _ in range(4)} if nv else words.DROPDOWNS
    names = rng.sample(sorted(dds), nd)
    tdd = rng.choice(names)
    values = {n: rng.choice(dds[n]) for n in names}
    options_t = dds[tdd]
    target = rng.choice([o for o in options_t if o != values[tdd]])
    need_save = rng.random() < 0.3
    save_label = _save_label(ctx, ["Save", "Apply", "Update", "Save settings"])
    parts = []
    for n in names:
        opts_html = "".join('<div class="ddo" role="option"%s>%s</div>' % (
            attrs(data_ddopt=o, data_desc="the %s option in the open %s list" % (q(o), q(n))), esc(o)) for o in dds[n])
        shown = ("%s: %s" % (n, values[n])) if variant == "pill_chips" else values[n]
        btn = '<button type="button" class="ddb"%s><span data-ddval>%s</span> <span class="caret">▾</span></button>' % (
            attrs(data_ddbtn=n, data_desc="the %s dropdown" % q(n)), esc(shown))
        dd = '<div class="dd"%s>%s<div class="ddl hidden" role="listbox">%s</div></div>' % (
            attrs(data_dd=n, data_value=values[n], data_fmt="pill" if variant == "pill_chips" else None), btn, opts_html)
        if variant == "labeled_above" or variant == "form_grid":
            parts.append('<div class="field"><span>%s</span>%s</div>' % (esc(n), dd))
        elif variant == "filter_bar":
            parts.append('<div class="row" style="gap:.4em"><span class="muted">%s:</span>%s</div>' % (esc(n), dd))
        elif variant == "settings_rows":
            parts.append('<div class="srow"><span>%s</span>%s</div>' % (esc(n), dd))
        elif variant == "pill_chips":
            parts.append(dd)
        else:
            parts.append('<div class="field">%s<span class="muted small">%s</span></div>' % (dd, esc(n)))
    if variant == "form_grid":
        for lab, ph, kind in rng.sample(words.TEXT_FIELDS, 2):
            parts.insert(rng.randrange(len(parts) + 1), '<label class="field"><span>%s</span><input type="text" placeholder="%s"></label>' % (esc(lab), esc(ph)))
    wrap_cls = "row" if variant in ("filter_bar", "pill_chips") else ("fgrid" if variant == "form_grid" else "")
    save = ('<div style="margin-top:.8em">%s</div>' % _save_button(th, save_label)) if need_save else ""
    filler = "".join('<div class="card" style="margin-top:.8em"><b>%s</b><p class="muted small">%s</p></div>' % (
        esc(rng.choice(words.HEADLINES)), esc(rng.choice(words.FILLER_SENTENCES))) for _ in range(rng.randint(0, 3)))
    main = '<div class="card"><div class="status" data-status role="status"></div><div class="%s">%s</div>%s</div>%s' % (
        wrap_cls, "".join(parts), save, filler)
    ddb_style = ("border-radius:999px;background:var(--surface2);" if variant == "pill_chips" else "border-radius:var(--radius);background:var(--surface);")
    css = (".dd{position:relative;display:inline-block;min-width:10em}.ddb{font:inherit;color:var(--text);%sborder:1px solid var(--border);"
           "padding:.42em .7em;width:100%%;text-align:left;display:flex;justify-content:space-between;gap:.8em;cursor:pointer}"
           ".ddl{position:absolute;left:0;top:100%%;margin-top:2px;min-width:100%%;background:var(--surface);border:1px solid var(--border);"
           "border-radius:var(--radius);box-shadow:0 6px 18px rgba(0,0,0,.2);z-index:80;padding:.25em 0}"
           ".ddo{padding:.35em .8em;cursor:pointer;white-space:nowrap}.ddo:hover{background:var(--surface2)}.ddo.sel{font-weight:700}"
           ".ddo.sel::before{content:'✓ '}.srow{display:flex;justify-content:space-between;align-items:center;gap:1em;padding:.45em 0;border-bottom:1px solid var(--border)}"
           ".fgrid{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:.4em 1em}" % ddb_style)
    ques = ctx.phrase("dropdown", option=q(target), dd=q(tdd))
    if need_save:
        ques = ques.rstrip(".") + THEN_SAVE[ctx.lang].format(save=q(save_label)) + "."
    return dict(kind="action", ques=ques, main=main, js="forms", css=css, steps=2 + need_save, state=dict(saved=None, open=None),
                config=dict(dd=tdd, option=target, needSave=need_save, saveLabel=save_label,
                            done=["I set %s to %s%s." % (q(tdd), q(target), " and saved" if need_save else ""),
                                  "%s now shows %s." % (tdd, q(target))]),
                opts=dict(title=rng.choice(["Preferences", "Filters", "Report options", "Profile", ""]), no_fixed=True, avoid=[save_label]))


LIST_SOURCES = [("Destination", lambda r: r.sample(words.CITIES, 8)), ("Assignee", lambda r: [person(r) for _ in range(7)]),
                ("Category", lambda r: words.DROPDOWNS["Category"][:]), ("Language", lambda r: words.DROPDOWNS["Language"][:]),
                ("Time zone", lambda r: words.DROPDOWNS["Time zone"][:]), ("Project", lambda r: words.PROJECTS[:]),
                ("Department", lambda r: words.DEPARTMENTS[:8]), ("Country", lambda r: r.sample(words.DROPDOWNS["Country"], 8))]


def _novel_list(nv):
    """A list source (like LIST_SOURCES) whose options are invented people, places or labels."""
    kind = nv.rng.choice(["person", "place", "label"])
    if kind == "person":
        opts = [nv.person() for _ in range(7)]
    elif kind == "place":
        opts = [nv.place() for _ in range(8)]
    else:
        opts = nv.mix(nv.rng.randint(6, 9), DROPDOWN_WORDS)
    return lambda r: opts


def build_listbox(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["bordered", "two_lists", "avatar_list", "tile_grid"], ["striped", "master_detail"])
    nl = 2 if variant == "two_lists" else 1
    srcs = [(ctx.novel.group_name(), _novel_list(ctx.novel)) for _ in range(nl)] if ctx.novel else rng.sample(LIST_SOURCES, nl)
    lists = []
    for name, fn in srcs:
        opts = list(dict.fromkeys(fn(rng)))
        if ctx.size == "small":
            opts = opts[:rng.randint(4, 6)]
        lists.append((name, opts, rng.choice(opts) if rng.random() < 0.6 else None))
    tname, topts, tinit = rng.choice(lists)
    target = rng.choice([o for o in topts if o != tinit])
    need_save = rng.random() < 0.3
    save_label = _save_label(ctx, ["Confirm", "Select", "OK", "Apply", "Done"])
    blocks = []
    for name, opts, init in lists:
        items = []
        for o in opts:
            sel = ' aria-selected="true"' if o == init else ' aria-selected="false"'
            inner = esc(o)
            if variant == "avatar_list":
                inner = '<span class="av">%s</span><span>%s<br><span class="muted small">%s</span></span>' % (
                    esc(o[0]), esc(o), esc(rng.choice(["Available", "Updated today", "3 items", "Popular"])))
            items.append('<div role="option" class="lbo"%s%s>%s</div>' % (attrs(data_lbo=o, data_desc="the %s option in the %s list" % (q(o), q(name))), sel, inner))
        lb = '<div class="lb %s" role="listbox"%s>%s</div>' % (variant, attrs(data_lb=name, aria_label=name), "".join(items))
        if variant == "master_detail":
            lb = '<div class="row" style="align-items:flex-start">%s<div class="card" style="flex:1;min-width:160px"><b data-detail="%s">%s</b><p class="muted small">%s</p></div></div>' % (
                lb, esc(name), esc(init or "Nothing selected"), esc(rng.choice(words.FILLER_SENTENCES)))
        blocks.append('<div class="lbw"><div class="lbt" id="lbl-%d">%s</div>%s</div>' % (len(blocks), esc(name), lb))
    save = ('<div style="margin-top:.8em">%s</div>' % _save_button(th, save_label)) if need_save else ""
    main = '<div class="card"><div class="status" data-status role="status"></div><div class="row" style="align-items:flex-start;gap:1.5em">%s</div>%s</div>' % ("".join(blocks), save)
    css = (".lbw{flex:1 1 200px;min-width:0}.lbt{font-weight:700;margin-bottom:.3em}.lb{border:1px solid var(--border);border-radius:var(--radius);background:var(--surface);min-width:180px}"
           ".lbo{padding:.35em .7em;cursor:pointer;display:flex;gap:.5em;align-items:center}.lbo:hover{background:var(--surface2)}"
           ".lbo[aria-selected=true]{background:var(--brand);color:var(--on-brand)}.lbo[aria-selected=true] .muted{color:inherit}"
           ".lb.striped .lbo:nth-child(even){background:var(--surface2)}.lb.striped .lbo[aria-selected=true]{background:var(--brand)}"
           ".lb.striped .lbo[aria-selected=true]::after{content:' ✓'}"
           ".lb.tile_grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(110px,1fr));gap:.3em;padding:.3em;max-width:520px}"
           ".lb.tile_grid .lbo{border:1px solid var(--border);border-radius:var(--radius);justify-content:center;text-align:center}"
           ".av{display:inline-flex;width:1.8em;height:1.8em;border-radius:50%;background:var(--accent);color:#fff;align-items:center;justify-content:center;flex:none}")
    ques = ctx.phrase("listbox", option=q(target), lb=q(tname))
    if need_save:
        ques = ques.rstrip(".") + THEN_SAVE[ctx.lang].format(save=q(save_label)) + "."
    return dict(kind="action", ques=ques, main=main, js="forms", css=css, steps=1 + need_save, state=dict(saved=None),
                config=dict(lb=tname, option=target, needSave=need_save, saveLabel=save_label,
                            done=["I selected %s in the %s list%s." % (q(target), q(tname), " and confirmed" if need_save else ""),
                                  "%s is now selected in %s." % (q(target), tname)]),
                opts=dict(title=rng.choice(["Choose an option", "Assign", "Settings", "Select", ""]), avoid=[save_label]))


def build_login(ctx):
    rng, th = ctx.rng, ctx.theme
    variant = ctx.variant(["card_login", "two_step", "inline_row", "social_first"], ["grid_labels", "placeholder_only"])
    if ctx.novel:  # an invented account name and password
        name = ctx.novel.person()
        user, pw = username(rng, name), ctx.novel.password()
    else:
        name = person(rng)
        user, pw = username(rng, name), password(rng)
    ulab = rng.choice(["Email" if "@" in user else "Username", "Email or username", "Username" if "@" not in user else "Email address", "Login"])
    plab = rng.choice(["Password", "Password", "Your password"])
    btn = th.label(rng.choice(["Sign in", "Log in", "Continue", "Sign in securely", "Login"]))
    nxt = th.label(rng.choice(["Next", "Continue"]))

    def inp(lab, typ, key, ph=None):
        desc = ("the %s field" % q(lab)) if variant != "placeholder_only" else "the %s input" % q(lab)
        return '<input type="%s"%s>' % (typ, attrs(data_login=key, placeholder=ph, autocomplete="off", data_desc=desc))
    bbtn = '<button type="submit" class="btn"%s>%s</button>' % (attrs(data_signin=True, data_desc="the %s button" % q(btn)), esc(btn))
    extras = '<div class="row small" style="justify-content:space-between;margin:.4em 0"><label class="opt"><input type="checkbox"> %s</label><a href="#" data-chrome>%s</a></div>' % (
        esc(rng.choice(["Remember me", "Keep me signed in", "Stay logged in"])), esc(rng.choice(["Forgot password?", "Reset password", "Trouble signing in?"])))
    signup = '<p class="small muted">%s <a href="#" data-chrome>%s</a></p>' % (esc(rng.choice(["New here?", "No account yet?", "Don't have an account?"])),
                                                                         esc(rng.choice(["Create an account", "Sign up", "Register"])))
    status = '<div class="status" data-status role="status"></div>'
    if variant == "two_step":
        step1 = '<div data-step="1"><label class="field"><span>%s</span>%s</label><button type="button" class="btn"%s>%s</button></div>' % (
            esc(ulab), inp(ulab, "text", "user"), attrs(data_next=True, data_desc="the %s button" % q(nxt)), esc(nxt))
        step2 = ('<div data-step="2" class="hidden"><p>%s <b data-whoami></b> <a href="#"%s>%s</a></p><label class="field"><span>%s</span>%s</label>%s</div>'
                 % (esc(rng.choice(["Signing in as", "Account:"])), attrs(data_change=True, data_desc='the "Change" link next to the account name'), "Change",
                    esc(plab), inp(plab, "password", "pass"), bbtn))
        form = "<form data-loginform novalidate>%s%s%s</form>%s" % (status, step1, step2, signup)
    elif variant == "inline_row":
        form = '<form data-loginform novalidate>%s<div class="row" style="align-items:flex-end"><label class="field" style="margin:0;flex:1;min-width:140px"><span>%s</span>%s</label><label class="field" style="margin:0;flex:1;min-width:140px"><span>%s</span>%s</label>%s</div></form>' % (
            status, esc(ulab), inp(ulab, "text", "user"), esc(plab), inp(plab, "password", "pass"), bbtn)
    elif variant == "grid_labels":
        form = '<form data-loginform novalidate>%s<div class="lgrid"><label>%s</label>%s<label>%s</label>%s</div>%s%s</form>%s' % (
            status, esc(ulab), inp(ulab, "text", "user"), esc(plab), inp(plab, "password", "pass"), extras, bbtn, signup)
    elif variant == "placeholder_only":
        form = '<form data-loginform novalidate>%s<div class="field">%s</div><div class="field">%s</div>%s</form>%s' % (
            status, inp(ulab, "text", "user", ph=ulab), inp(plab, "password", "pass", ph=plab), bbtn, signup)
    else:
        social = ""
        if variant == "social_first":
            social = '<div class="stack">%s</div><p class="muted small" style="text-align:center">— or —</p>' % "".join(
                '<button type="button" class="btn2" data-chrome style="width:100%%">Continue with %s</button>' % s for s in rng.sample(["Google", "Apple", "GitHub", "Microsoft"], 2))
        form = '%s<form data-loginform novalidate>%s<label class="field"><span>%s</span>%s</label><label class="field"><span>%s</span>%s</label>%s%s</form>%s' % (
            social, status, esc(ulab), inp(ulab, "text", "user"), esc(plab), inp(plab, "password", "pass"), extras, bbtn, signup)
    heading = rng.choice(["Sign in to %s" % ctx.site, "Welcome back", "Log in", "Member login", "Sign in"])
    welcome = '<div data-welcome class="hidden card"><h2>%s, <span data-uname></span>!</h2><p>%s</p><button type="button" class="btn2" data-chrome>%s</button></div>' % (
        esc(rng.choice(["Welcome back", "Hello", "Good to see you"])), esc(rng.choice(words.FILLER_SENTENCES)), esc(rng.choice(["Sign out", "Log out"])))
    main = '<div data-loginview><h2>%s</h2>%s</div>%s' % (esc(heading), form, welcome)
    css = ".lgrid{display:grid;grid-template-columns:auto 1fr;gap:.6em 1em;align-items:center;margin-bottom:.6em}"
    return dict(kind="action", ques=ctx.phrase("login", user=q(user), pw=q(pw)), main=main, js="forms", css=css,
                steps=3 + (variant == "two_step"), state=dict(loggedIn=False, user=None, failures=0),
                config=dict(user=user, password=pw, twoStep=variant == "two_step",
                            done=["Logged in as %s." % user, "I signed in with the account %s." % user]),
                opts=dict(title="", widget_title=ctx.site if rng.random() < 0.6 else "Account", avoid=[btn]))
