"""More first-step policy examples from the recorded screenshots (`pipeline build --policy-variants K`).

A recorded episode gives the policy two or three targets, too few for a small model to learn to match a task
to the page's element list rather than memorise replies. For the first policy turn of an episode, this makes K
one-turn variants on the same screenshot and element list: a new task about one listed control (click a
button, link, tab or item; type into a field; tick or untick a box; choose a radio button), worded with the
train templates of train/tasks/phrasing.py, and the reply the oracle gives for that step (the element as the
list names it, its listed point). Variants never use eval wordings, and their labels are the page's own.
"""

import json
import random
import re
import sys
import os

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tasks"))
from phrasing import PHRASES, q  # noqa: E402
import words  # noqa: E402

LIST_HEAD = "Page elements (x, y from 0 to 1000):\n"
LINE = re.compile(r'^(the (?:checkbox next to |checkbox in the |radio button in the )?"([^"]+)"'
                  r'(?: (button|link|tab|item|field|radio button|dropdown|row))?) \((\d+), (\d+)\)(?:, (.*))?$')
TEXT_LINE = re.compile(r'^the text "([^\n]*)" \(\d+, \d+\)$', re.M)
KIND_TEMPLATES = {"button": "click_button", "link": "click_link", "tab": "click_tab", "item": "click_link"}
THOUGHTS = ["I click {desc}.", "{Desc} is on the page, so I click it.", "The task asks for {label}; I click {desc}."]
WRITE_THOUGHTS = ["I type {value} into {desc}.", "{Desc} is {state}; I type {value} into it."]
TICK = {True: ["Tick {label}.", "Check the box {label}.", "Please select the option {label}."],
        False: ["Untick {label}.", "Uncheck the box {label}.", "Please clear the option {label}."]}
RADIO = ["Choose {label}.", "Select the {label} option.", "Pick {label} from the choices."]


def listed(text):
    """(description, label, kind, x, y, state) of each listed element in a policy prompt, or [] without a list."""
    at = text.find(LIST_HEAD)
    if at < 0:
        return []
    body = text[at + len(LIST_HEAD):].split("\nScreenshot:", 1)[0]
    out = []
    for line in body.split("\n"):
        m = LINE.match(line)
        if m:
            desc, label, kind, x, y, state = m.groups()
            if desc.startswith("the checkbox "):  # next to its label, or in a table row named by it
                kind = "checkbox"
            elif desc.startswith("the radio button in the "):
                kind = "radio button"
            out.append((desc, label, kind, int(x), int(y), state or ""))
    return out


# Words for typed values that no recorded task uses together, so a reply can only get them by copying the task.
VALUE_WORDS = sorted({w for group in (words.FIRST_NAMES, words.LAST_NAMES, words.CITIES, words.MODEL_WORDS,
                                      words.BRANDS, words.COLORS, words.PRODUCT_TYPES, words.MATERIALS,
                                      words.ARTICLE_TOPICS, words.JOBS)
                      for w in (group.split() if isinstance(group, str) else group)})
SINGLE_WORDS = [w for w in VALUE_WORDS if " " not in w]


def random_value(rng, labels):
    """A value to type: another label of the page (2 in 5), else a random phrase, email, number or code."""
    if labels and rng.random() < 0.4:
        return rng.choice(labels)
    kind = rng.randrange(5)
    if kind == 0:
        return " ".join(rng.choice(VALUE_WORDS) for _ in range(rng.randint(1, 4)))
    if kind == 1:
        first, last, host = (rng.choice(VALUE_WORDS).lower().replace(" ", "") for _ in range(3))
        return f"{first}.{last}@{host}.com"
    if kind == 2:
        return str(rng.randint(0, 10 ** rng.randint(1, 8)))
    if kind == 3:
        return rng.choice(VALUE_WORDS).lower().replace(" ", "") + "_" + str(rng.randint(1, 9999))
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 12)))


def reply(thought, action):
    return json.dumps({"thought": thought, "note": "", "action": action}, ensure_ascii=False,
                      separators=(",", ":"))


def cap(s):
    return s[:1].upper() + s[1:]


def variant(rng, element, others):
    """(task, reply) for one listed element, or None when it is nothing to act on."""
    desc, label, kind, x, y, state = element
    ql = q(label)
    if kind in KIND_TEMPLATES:
        task = rng.choice(PHRASES[KIND_TEMPLATES[kind]]["train"]).format(label=ql)
        t = rng.choice(THOUGHTS).format(desc=desc, Desc=cap(desc), label=ql)
        return task, reply(t, {"type": "click", "element": desc, "x": x, "y": y})
    if kind == "field":
        value = random_value(rng, others)
        task = rng.choice(PHRASES["type_submit"]["train"]).format(value=q(value), field=ql)
        t = rng.choice(WRITE_THOUGHTS).format(value=q(value), desc=desc, Desc=cap(desc), state=state or "empty")
        return task, reply(t, {"type": "write", "content": value, "element": desc, "x": x, "y": y})
    if kind == "checkbox" and state in ("checked", "not checked"):
        task = rng.choice(TICK[state == "not checked"]).format(label=ql)
        return task, reply(f"{cap(desc)} is {state}; I click it.", {"type": "click", "element": desc, "x": x, "y": y})
    if kind == "radio button" and state == "not checked":
        task = rng.choice(RADIO).format(label=ql)
        return task, reply(f"{ql} is not chosen yet; I click {desc}.",
                           {"type": "click", "element": desc, "x": x, "y": y})
    return None


def policy_variants(session, rng, k):
    """Up to k one-turn policy sessions made from `session`'s first turn (see the module's docstring)."""
    first = session["turns"][0]
    texts = [i for i, p in enumerate(first["parts"]) if "text" in p]
    if not texts or "Notes:\n(none)" not in first["parts"][texts[0]]["text"]:
        return []
    text = first["parts"][texts[0]]["text"]
    elements = listed(text)
    labels = [e[1] for e in elements if len(e[1]) <= 30]
    # A label listed twice is ambiguous: no task names it.
    candidates = [e for e in elements if labels.count(e[1]) == 1 and
                  (e[2] in KIND_TEMPLATES or e[2] in ("field", "checkbox", "radio button"))]
    rng.shuffle(candidates)
    out = []
    for element in candidates:
        if len(out) >= k:
            break
        made = variant(rng, element, [v for v in labels if v != element[1]])
        if made is None:
            continue
        task, output = made
        new_text, n = re.subn(r"\nTask: [^\n]*\n", "\nTask: " + task.replace("\\", "\\\\") + "\n", text, count=1)
        if n != 1:
            return []
        parts = [dict(p) for p in first["parts"]]
        parts[texts[0]] = {"text": new_text}
        out.append({"role": "policy", "turns": [{"parts": parts, "output": output}]})
    return out


def task_of(turn):
    """The task line of a recorded policy turn's text, or "" when it has none."""
    text = next((p["text"] for p in turn["parts"] if "text" in p), "")
    m = re.search(r"\nTask: ([^\n]*)\n", text)
    return m.group(1) if m else ""


def typed_values(session):
    """The values the session's replies type that its task quotes (the only ones safe to swap)."""
    task = task_of(session["turns"][0])
    values = set()
    for turn in session["turns"]:
        try:
            action = json.loads(turn["output"])["action"]
        except (ValueError, KeyError, TypeError):
            continue
        c = action.get("content", "") if action.get("type") == "write" else ""
        if task and len(c) >= 3 and '"' not in c and "\\" not in c and c in task:
            values.add(c)
    return values


def answered_values(session):
    """The listed texts that the session's final answer quotes verbatim and its task does not name (a price, a
    date, a person's name read off the page)."""
    last = session["turns"][-1]
    try:
        action = json.loads(last["output"])["action"]
    except (ValueError, KeyError, TypeError):
        return set()
    if action.get("type") != "answer":
        return set()
    text = next((p["text"] for p in last["parts"] if "text" in p), "")
    task = task_of(last).lower()
    content = action.get("content", "")
    values = set()
    for label in TEXT_LINE.findall(text):
        if len(label) >= 3 and '"' not in label and "\\" not in label and label in content \
                and label.lower() not in task:
            values.add(label)
    return values


def similar_value(rng, value):
    """A random value of the same shape: each digit another digit, else each word another word."""
    if any(c.isdigit() for c in value):
        return "".join(str(rng.randint(1 if c != "0" else 0, 9)) if c.isdigit() else c for c in value)
    out = []
    for w in value.split(" "):
        new = rng.choice(SINGLE_WORDS)
        out.append(new.capitalize() if w[:1].isupper() else new.lower())
    return " ".join(out)


def whole(value):
    """A regex matching `value` where no letter or digit touches it on either side."""
    return rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])"


def value_swaps(session, rng, k):
    """Up to k copies of a policy session in which each value it types that the task quotes, and each listed
    text its answer quotes, is another random value, everywhere in its texts and replies (the task, the element
    list, the history, the typed content, the answer). The screenshots keep the old value: the list and the
    task are what the reply copies from, and a small model otherwise learns which value goes with which page."""
    typed, answered = typed_values(session), answered_values(session)
    if not typed and not answered:
        return []
    out = []
    for _ in range(k):
        swap = {}
        for c in sorted(typed | answered, key=len, reverse=True):
            v = random_value(rng, []) if c in typed else similar_value(rng, c)
            swap[c] = v if c not in v and v != c else v + "x"
        pattern = re.compile("|".join(whole(c) for c in swap))
        sub = lambda text: pattern.sub(lambda m: swap[m.group(0)], text)
        turns = []
        for turn in session["turns"]:
            new = dict(turn)
            new["parts"] = [{"text": sub(p["text"])} if "text" in p else dict(p) for p in turn["parts"]]
            new["output"] = sub(turn["output"])
            turns.append(new)
        out.append({"role": session["role"], "turns": turns})
    return out


def typo(rng, value):
    """The value with one letter or digit replaced, dropped or doubled: the near-copies a small model makes."""
    spots = [i for i, c in enumerate(value) if c.isalnum()]
    if not spots:
        return value + "x"
    i = rng.choice(spots)
    c = value[i]
    kind = rng.randrange(3)
    if kind == 0:
        pool = "0123456789" if c.isdigit() else "abcdefghijklmnopqrstuvwxyz"
        new = rng.choice([d for d in pool if d != c.lower()])
        return value[:i] + (new.upper() if c.isupper() else new) + value[i + 1:]
    if kind == 1 and len(spots) > 1:
        return value[:i] + value[i + 1:]
    return value[:i] + c + value[i:]


VALIDATOR_TRUE = re.compile(r"^The answer gives (.+) for (.+), as the page shows\.$")
PAGE_HEAD = "Page elements now:\n"


def validator_swaps(session, rng, k):
    """Up to k copies of a validator session that accepts an answer quoting a listed text (a price, a date, a
    name read off the page). Half keep the verdict with the value replaced everywhere (task side and page side
    agree); the other half replace it in the answer and notes only, by a value of the same shape or a near-copy
    with one character changed, and reject it, naming both values. A validator that only learns accepted
    answers says yes to a misread price."""
    if session["role"] != "validator" or len(session["turns"]) != 1:
        return []
    turn = session["turns"][0]
    try:
        verdict = json.loads(turn["output"])
    except ValueError:
        return []
    at = next((i for i, p in enumerate(turn["parts"]) if "text" in p), None)
    m = VALIDATOR_TRUE.match(verdict.get("reason", "")) if isinstance(verdict, dict) else None
    if at is None or not m or verdict.get("success") is not True:
        return []
    text = turn["parts"][at]["text"]
    head, sep, page = text.partition(PAGE_HEAD)
    answer = re.search(r"\nAnswer: ([^\n]*)\n", head)
    task = task_of(turn).lower()
    values = [v for v in TEXT_LINE.findall(page) if len(v) >= 3 and '"' not in v and "\\" not in v
              and answer and v in answer.group(1) and v in m.group(1) and v.lower() not in task]
    if not sep or not values:
        return []
    value = max(values, key=len)
    word = re.compile(whole(value))
    out = []
    for i in range(k):
        if i % 2 == 0:
            new = similar_value(rng, value)
            new = new if value not in new and new != value else new + "x"
            new_text = word.sub(new, text)
            reason = word.sub(new, verdict["reason"])
            output = {"reason": reason, "success": True}
        else:
            new = typo(rng, value) if rng.random() < 0.5 else similar_value(rng, value)
            if new == value:
                continue
            new_text = word.sub(new, head) + sep + page
            gives = word.sub(new, m.group(1))
            output = {"reason": f"The answer gives {gives} but the page shows {m.group(1)} for {m.group(2)}.",
                      "success": False}
        parts = [dict(p) for p in turn["parts"]]
        parts[at] = {"text": new_text}
        out.append({"role": "validator", "turns": [{"parts": parts, "output": json.dumps(
            output, ensure_ascii=False, separators=(",", ":"))}]})
    return out


if __name__ == "__main__":
    # Prints the variants of the first episodes of a recording, for reading.
    rng = random.Random(1)
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in list(f)[:3]:
            ep = json.loads(line)
            for s in ep["sessions"]:
                if s["role"] == "policy":
                    for v in policy_variants(s, rng, 3):
                        t = v["turns"][0]
                        print(t["parts"][0]["text"].split("Task: ")[1].split("\n")[0], "->", t["output"])
                    break
