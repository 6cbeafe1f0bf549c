#!/usr/bin/env python3
"""Self-check of generated tasks: drives headless Chromium over the DevTools protocol (on a pipe).

    python3 train/tasks/selfcheck.py DIR [--jobs 2] [--shots /tmp/gen_shots] [--limit N] [--only ID,...]

For every task in DIR/tasks.jsonl it opens the page at the task's viewport, checks the initial state
(check("") fails for action tasks; the oracle's mistake answer fails the check), then repeatedly asks
window.__surfTask.oracle() for the next step and executes it with real CDP input, as surf does: a click
is mouseMoved + mousePressed + mouseReleased at the target centre; a write is that click, ctrl+a,
Backspace, Input.insertText and Enter; a scroll is a mouse wheel at the viewport centre by 0.8 of the
viewport height. When the oracle answers, check(answer) must succeed. Prints per-family pass counts and
writes failures (with the oracle trace) to DIR/selfcheck_failures.jsonl.
"""
import argparse
import base64
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome"]
MAX_STEPS = 15


class Browser:
    """A headless Chromium driven over --remote-debugging-pipe (fd 3 commands, fd 4 replies, NUL framed)."""

    def __init__(self):
        exe = next((shutil.which(c) for c in CHROMIUM_CANDIDATES if shutil.which(c)), None)
        if not exe:
            sys.exit("selfcheck: no chromium found (apt-get install -y chromium)")
        self.tmp = tempfile.mkdtemp(prefix="surf-selfcheck-")
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def child_fds():
            a, b = os.dup(cmd_r), os.dup(res_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + self.tmp, "--no-first-run",
                "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--disable-smooth-scrolling", "--disable-background-networking", "--disable-extensions",
                "--force-color-profile=srgb", "--mute-audio", "--disable-background-timer-throttling",
                "--disable-renderer-backgrounding", "--allow-file-access-from-files", "about:blank"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        self.proc = subprocess.Popen(args, preexec_fn=child_fds, pass_fds=(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=False)
        os.close(cmd_r)
        os.close(res_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_msg(self, timeout=30.0):
        deadline = time.time() + timeout
        while b"\0" not in self.buf:
            import select
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            r, _, _ = select.select([self.res_r], [], [], left)
            if r:
                chunk = os.read(self.res_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30.0):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_msg(timeout)
            if reply.get("id") == mid:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def new_tab(self):
        if self.session:
            try:
                self.call("Target.closeTarget", {"targetId": self.target}, session=False)
            except Exception:
                pass
        self.target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": self.target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError("JS error: %s" % (d.get("exception", {}).get("description") or d.get("text")))
        return r["result"].get("value")

    def open(self, url, w, h):
        self.new_tab()
        self.call("Emulation.setDeviceMetricsOverride", {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False})
        self.call("Page.navigate", {"url": url})
        for _ in range(200):
            if self.eval("document.readyState") == "complete" and self.eval("!!window.__surfTask"):
                return
            time.sleep(0.02)
        raise RuntimeError("page did not load")

    def mouse(self, typ, x, y, **kw):
        p = {"type": typ, "x": x, "y": y, "modifiers": 0}
        p.update(kw)
        self.call("Input.dispatchMouseEvent", p)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y, button="none", buttons=0)
        self.mouse("mousePressed", x, y, button="left", buttons=1, clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", buttons=0, clickCount=1)

    def key(self, typ, key, code, vk, text=None, modifiers=0, commands=None):
        p = {"type": typ, "key": key, "code": code, "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk,
             "modifiers": modifiers}
        if text:
            p["text"] = text
            p["unmodifiedText"] = text
        if commands:
            p["commands"] = commands
        self.call("Input.dispatchKeyEvent", p)

    def write(self, x, y, text):
        self.click(x, y)
        self.key("rawKeyDown", "Control", "ControlLeft", 17, modifiers=2)
        self.key("rawKeyDown", "a", "KeyA", 65, modifiers=2, commands=["selectAll"])
        self.key("keyUp", "a", "KeyA", 65, modifiers=2)
        self.key("keyUp", "Control", "ControlLeft", 17)
        self.key("rawKeyDown", "Backspace", "Backspace", 8)
        self.key("keyUp", "Backspace", "Backspace", 8)
        if text:
            self.call("Input.insertText", {"text": text})
        self.key("keyDown", "Enter", "Enter", 13, text="\r")
        self.key("keyUp", "Enter", "Enter", 13)

    def scroll(self, w, h, direction):
        dy = 0.8 * h * (1 if direction == "down" else -1)
        self.mouse("mouseMoved", w / 2, h / 2, button="none", buttons=0)
        self.mouse("mouseWheel", w / 2, h / 2, deltaX=0, deltaY=dy, pointerType="mouse")
        last = None
        for _ in range(20):  # wait until the scroll position settles
            time.sleep(0.03)
            y = self.eval("scrollY")
            if y == last:
                break
            last = y

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.proc.terminate()
            self.proc.wait(5)
        except Exception:
            self.proc.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def validate_step(o, w, h):
    """Returns an error string when an oracle step breaks the contract, else None."""
    if not isinstance(o, dict) or not isinstance(o.get("thought"), str) or not o["thought"].strip():
        return "missing thought"
    if not isinstance(o.get("note"), str):
        return "note is not a string"
    a = o.get("action") or {}
    t = a.get("type")
    if t not in ("click", "write", "scroll", "answer"):
        return "bad action type %r" % t
    if t in ("click", "write"):
        tg = o.get("target")
        if not tg or not a.get("element"):
            return "click/write without target or element"
        if tg["x"] < -0.5 or tg["y"] < -0.5 or tg["x"] + tg["w"] > w + 0.5 or tg["y"] + tg["h"] > h + 0.5 or tg["w"] <= 0:
            return "target outside viewport: %r" % tg
        if t == "write" and not isinstance(a.get("content"), str):
            return "write without content"
    if t == "scroll" and a.get("direction") not in ("up", "down"):
        return "bad scroll direction"
    if t == "answer" and not isinstance(a.get("content"), str):
        return "answer without content"
    return None


def run_task(br, task, shots_dir=None):
    """Runs one task; returns (ok, message, trace, steps)."""
    w, h = task["viewport"]
    url = task["web"]
    br.open(url, w, h)
    trace = []
    if shots_dir:
        br.screenshot(os.path.join(shots_dir, task["id"] + "-0.png"))
    over = br.eval("document.documentElement.scrollWidth - innerWidth")
    if over > 1:
        return False, "page overflows the viewport horizontally by %dpx" % over, trace, 0
    kind = br.eval("window.__surfTask.kind")
    c0 = br.eval("window.__surfTask.check('')")
    if kind == "action" and c0.get("success"):
        return False, "check('') succeeds on the initial page", trace, 0
    if kind == "qa" and c0.get("success"):
        return False, "empty answer passes the check", trace, 0
    m = br.eval("window.__surfTask.oracle({mistake:true})")
    err = validate_step(m, w, h)
    if err:
        return False, "mistake step: " + err, trace, 0
    if m["action"]["type"] != "answer":
        return False, "mistake step is not an answer", trace, 0
    cm = br.eval("window.__surfTask.check(%s)" % json.dumps(m["action"]["content"]))
    if cm.get("success"):
        return False, "mistake answer %r passes the check" % m["action"]["content"], trace, 0
    for step in range(1, MAX_STEPS + 1):
        o = br.eval("window.__surfTask.oracle({})")
        trace.append(o)
        err = validate_step(o, w, h)
        if err:
            return False, "step %d: %s" % (step, err), trace, step
        a = o["action"]
        if a["type"] == "answer":
            res = br.eval("window.__surfTask.check(%s)" % json.dumps(a["content"]))
            if shots_dir:
                br.screenshot(os.path.join(shots_dir, task["id"] + "-end.png"))
            if not res.get("success"):
                return False, "final check failed: %s" % res.get("reason"), trace, step
            if step > task.get("max_steps", 99):
                return False, "took %d steps, over max_steps %d" % (step, task["max_steps"]), trace, step
            return True, res.get("reason", ""), trace, step
        tg = o.get("target")
        if a["type"] == "click":
            br.click(tg["x"] + tg["w"] / 2, tg["y"] + tg["h"] / 2)
        elif a["type"] == "write":
            br.write(tg["x"] + tg["w"] / 2, tg["y"] + tg["h"] / 2, a["content"])
        else:
            br.scroll(w, h, a["direction"])
        time.sleep(0.1)
        if shots_dir and step <= 3:
            br.screenshot(os.path.join(shots_dir, "%s-%d.png" % (task["id"], step)))
    return False, "no answer after %d steps" % MAX_STEPS, trace, MAX_STEPS


# (kind, answer, truth, expected) cases for the tolerant answer matchers in js/runtime.js.
MATCHER_CASES = [
    ("money", "The price is $14.99.", 1499, True), ("money", "14,99 €", 1499, True), ("money", "It costs 1.299,00 €", 129900, True),
    ("money", "£1,299.00", 129900, True), ("money", "1299", 129900, True), ("money", "CHF 1'299.50", 129950, True),
    ("money", "1 299,00 €", 129900, True), ("money", "$12.50", 1499, False), ("money", "It costs $149.90", 1499, False),
    ("date", "March 3, 2025", [2025, 3, 3], True), ("date", "3 March 2025", [2025, 3, 3], True), ("date", "2025-03-03", [2025, 3, 3], True),
    ("date", "It is on Mar 3.", [2025, 3, 3], True), ("date", "le 3 mars 2025", [2025, 3, 3], True), ("date", "March 3, 2026", [2025, 3, 3], False),
    ("date", "March 4, 2025", [2025, 3, 3], False), ("date", "04/03/2025", [2025, 3, 3], False),
    ("name", "It is Ana López.", "Ana Lopez", True), ("name", "Ana Silva", "Ana Lopez", False),
    ("text", "The status is Shipped.", "Shipped", True), ("text", "Unshipped", "Shipped", False),
]


def matcher_selftest(br, task):
    """Checks the answer matchers on one loaded page; returns a list of failing cases."""
    w, h = task["viewport"]
    br.open(task["web"], w, h)
    bad = []
    for kind, answer, truth, want in MATCHER_CASES:
        spec = {"type": kind}
        if kind == "money":
            spec["cents"] = truth
        elif kind == "date":
            spec.update(ymd=truth, dayFirst=False, yearShown=True)
        else:
            spec["text"] = truth
        got = br.eval("window.__surfTask.rt.matchValue(%s, %s)" % (json.dumps(answer), json.dumps(spec)))
        if got != want:
            bad.append("%s %r vs %r: got %s" % (kind, answer, truth, got))
    return bad


def worker(args):
    tasks, shots_dir, shot_ids = args
    br = Browser()
    br.call("Target.setDiscoverTargets", {"discover": False}, session=False)
    out = []
    try:
        for t in tasks:
            try:
                ok, msg, trace, steps = run_task(br, t, shots_dir if t["id"] in shot_ids else None)
            except Exception as e:  # a JS error or a browser hiccup counts as a failure
                ok, msg, trace, steps = False, "exception: %s" % e, [], 0
                br.close()
                br = Browser()
            out.append({"id": t["id"], "family": t["family"], "ok": ok, "msg": msg, "steps": steps, "trace": trace})
    finally:
        br.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--shots", default="", help="folder for screenshots of a few tasks per family")
    ap.add_argument("--shots-per-family", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="tasks per family (0 = all)")
    ap.add_argument("--only", default="", help="comma-separated task ids")
    ap.add_argument("--save-traces", action="store_true", help="write every oracle trace to DIR/selfcheck_traces.jsonl")
    args = ap.parse_args()
    with open(os.path.join(args.dir, "tasks.jsonl"), encoding="utf-8") as f:
        tasks = [json.loads(line) for line in f if line.strip()]
    if args.only:
        keep = set(args.only.split(","))
        tasks = [t for t in tasks if t["id"] in keep]
    if args.limit:
        per = defaultdict(int)
        sel = []
        for t in tasks:
            if per[t["family"]] < args.limit:
                per[t["family"]] += 1
                sel.append(t)
        tasks = sel
    shot_ids = set()
    if args.shots:
        os.makedirs(args.shots, exist_ok=True)
        per = defaultdict(int)
        for t in tasks:
            if per[t["family"]] < args.shots_per_family:
                per[t["family"]] += 1
                shot_ids.add(t["id"])
    br = Browser()
    bad = matcher_selftest(br, tasks[0])
    br.close()
    if bad:
        print("answer matchers: %d cases FAIL: %s" % (len(bad), "; ".join(bad)))
    else:
        print("answer matchers: %d cases ok" % len(MATCHER_CASES))
    jobs = max(1, min(args.jobs, len(tasks)))
    chunks = [(tasks[i::jobs], args.shots or None, shot_ids) for i in range(jobs)]
    t0 = time.time()
    if jobs == 1:
        results = worker(chunks[0])
    else:
        with multiprocessing.Pool(jobs) as pool:
            results = [r for part in pool.map(worker, chunks) for r in part]
    fam = defaultdict(lambda: [0, 0])
    fails = []
    for r in results:
        fam[r["family"]][1] += 1
        if r["ok"]:
            fam[r["family"]][0] += 1
        else:
            fails.append(r)
    order = sorted(fam)
    for f in order:
        p, n = fam[f]
        print("%-14s %3d/%3d %s" % (f, p, n, "" if p == n else "FAIL"))
    total_p = sum(v[0] for v in fam.values())
    print("total          %d/%d in %.0fs" % (total_p, len(results), time.time() - t0))
    with open(os.path.join(args.dir, "selfcheck_failures.jsonl"), "w", encoding="utf-8") as f:
        for r in fails:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if args.save_traces:
        with open(os.path.join(args.dir, "selfcheck_traces.jsonl"), "w", encoding="utf-8") as f:
            for r in sorted(results, key=lambda r: r["id"]):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    for r in fails[:15]:
        print("FAIL %s: %s" % (r["id"], r["msg"]))
    print("%d passed, %d failed" % (total_p, len(results) - total_p))
    sys.exit(0 if not fails and not bad else 1)


if __name__ == "__main__":
    main()
