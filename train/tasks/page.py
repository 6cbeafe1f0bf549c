"""Page assembly: one self-contained HTML file from a theme, a frame and a family's component."""
import json
import os

import frames
from common import esc

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
_JS_CACHE = {}


def js(name):
    """Returns the text of js/<name>.js (cached)."""
    if name not in _JS_CACHE:
        with open(os.path.join(JS_DIR, name + ".js"), encoding="utf-8") as f:
            _JS_CACHE[name] = f.read()
    return _JS_CACHE[name]


GLOBAL_JS = """
// Page-wide behaviour: in-page links never navigate, cookie banners close, chrome clicks are recorded.
(function () {
  const T = window.__surfTask;
  document.addEventListener("click", function (e) {
    const a = e.target.closest('a[href^="#"]');
    if (a) e.preventDefault();
    const c = e.target.closest("[data-cookie]");
    if (c) { const b = c.closest(".cookie"); if (b) b.remove(); T.state.cookies = c.textContent.trim(); }
    const s = e.target.closest("[data-chrome]");
    if (s) (T.state.stray = T.state.stray || []).push((s.textContent || s.getAttribute("aria-label") || "").trim());
  }, true);
  document.addEventListener("submit", function (e) { e.preventDefault(); }, true);
})();
"""


def assemble(ctx, spec):
    """Returns the complete HTML document of one task."""
    opts = dict(spec.get("opts") or {})
    body = frames.render(ctx, ctx.frame, spec["main"], opts)
    config = {"id": ctx.task_id, "family": ctx.family, "split": ctx.split, "kind": spec["kind"],
              "state": spec.get("state", {})}
    config.update(spec.get("config") or {})
    cfg = json.dumps(config, ensure_ascii=False, sort_keys=True).replace("</", "<\\/")
    title = opts.get("title") or ctx.site
    css = ctx.theme.css() + frames.frame_css(ctx.theme) + spec.get("css", "")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>%s · %s</title>\n<style>%s</style></head>\n<body>\n%s\n"
            "<script>window.__surfTaskConfig = %s;</script>\n<script>%s</script>\n<script>%s</script>\n<script>%s</script>\n"
            "</body></html>\n" % (esc(title), esc(ctx.site), css, body, cfg, js("runtime"), GLOBAL_JS, js(spec["js"])))
