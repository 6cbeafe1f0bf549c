"""Checks augment.py's policy variants and value swaps on a small recorded-style session (no model, no
browser):  python3 -m train.surf_tiny.test_augment  (run by ctest as train_test_augment)."""

import json
import random

from . import augment

LIST = ('Page elements (x, y from 0 to 1000):\n'
        'the "Sign in" heading (500, 139)\n'
        'the "Username" field (500, 192), empty\n'
        'the "Password" field (500, 258), empty\n'
        'the "Log in" button (298, 324)\n'
        'the checkbox next to "Stay logged in" (235, 593), not checked\n')
TASK = 'Log into the account "olga@work.com" with the password "Falcon136".'


def turn(text, action):
    return {"parts": [{"text": text}, {"image": "shots/a.png"}],
            "output": json.dumps({"thought": "t", "note": "", "action": action}, ensure_ascii=False)}


def login_session():
    first = "Step 1 of 8.\nNotes:\n(none)\n" + LIST + "Task: " + TASK + "\nScreenshot:\n"
    second = first.replace('"Username" field (500, 192), empty', '"Username" field (500, 192), value "olga@work.com"')
    return {"role": "policy", "turns": [
        turn(first, {"type": "write", "content": "olga@work.com", "element": 'the "Username" field', "x": 500,
                     "y": 192}),
        turn(second, {"type": "write", "content": "Falcon136", "element": 'the "Password" field', "x": 500,
                      "y": 258}),
        turn(second, {"type": "answer", "content": "Logged in as olga@work.com."})]}


def check_value_swaps():
    session = login_session()
    assert augment.typed_values(session) == {"olga@work.com", "Falcon136"}
    swaps = augment.value_swaps(session, random.Random(3), 4)
    assert len(swaps) == 4
    for s in swaps:
        texts = [p["text"] for t in s["turns"] for p in t["parts"] if "text" in p] + [t["output"] for t in s["turns"]]
        joined = "\n".join(texts)
        assert "olga@work.com" not in joined and "Falcon136" not in joined, joined
        first = json.loads(s["turns"][0]["output"])["action"]["content"]
        second = json.loads(s["turns"][1]["output"])["action"]["content"]
        # The typed values are the task's new values, and the list shows the first as the field's value.
        assert f'"{first}"' in texts[0] and f'"{second}"' in texts[0]
        assert f'value "{first}"' in texts[1]
        assert first in json.loads(s["turns"][2]["output"])["action"]["content"]
        assert s["turns"][0]["parts"][1] == {"image": "shots/a.png"}  # the screenshots are the recorded ones
    # A value the task does not quote is never swapped: there is nothing in the prompt to copy it from.
    other = login_session()
    other["turns"][0]["output"] = other["turns"][0]["output"].replace("olga@work.com", "someone else")
    assert augment.typed_values(other) == {"Falcon136"}


def check_answer_swaps():
    text = ("Step 2 of 8.\nNotes:\n(none)\nPage elements (x, y from 0 to 1000):\n"
            'the text "Orange Thermos" (300, 200)\nthe text "£83.00" (300, 240)\n'
            'the "Add to cart" button (300, 280)\nTask: What is the price of the orange thermos?\nScreenshot:\n')
    session = {"role": "policy", "turns": [
        turn(text, {"type": "answer", "content": "The orange thermos costs £83.00."})]}
    # The price is read off the list; the product the task names is not a value to swap.
    assert augment.answered_values(session) == {"£83.00"}
    for s in augment.value_swaps(session, random.Random(2), 3):
        answer = json.loads(s["turns"][0]["output"])["action"]["content"]
        price = answer.split("costs ")[1].rstrip(".")
        assert price != "£83.00" and len(price) == len("£83.00") and price.startswith("£"), price
        assert f'the text "{price}"' in s["turns"][0]["parts"][0]["text"]
        assert "Orange Thermos" in s["turns"][0]["parts"][0]["text"]


def check_validator_swaps():
    text = ("System\nYou check a web agent's answer.\nUser\nTask: What is the price of the orange thermos?\n"
            "Answer: The orange thermos costs £83.00.\nNotes:\n- The orange thermos is £83.00.\n"
            'Page elements now:\nthe text "Orange Thermos" (300, 200)\nthe text "£83.00" (300, 240)\n'
            "Screenshots (1):\n")
    reason = "The answer gives £83.00 for the orange thermos, as the page shows."
    session = {"role": "validator", "turns": [{"parts": [{"text": text}, {"image": "shots/a.png"}],
                                               "output": json.dumps({"reason": reason, "success": True})}]}
    swaps = augment.validator_swaps(session, random.Random(5), 6)
    assert len(swaps) >= 5
    verdicts = set()
    for s in swaps:
        t = s["turns"][0]
        v = json.loads(t["output"])
        new = t["parts"][0]["text"]
        head, page = new.split("Page elements now:\n")
        given = head.split("Answer: The orange thermos costs ")[1].split(".\n")[0]
        assert given != "£83.00" and f"is {given}." in head, head
        if v["success"]:
            # Accepted: the page shows the same new value, and the reason names it.
            assert f'the text "{given}"' in page and "£83.00" not in new and given in v["reason"]
        else:
            # Rejected: the page keeps the real value; the reason names both.
            assert 'the text "£83.00"' in page
            assert v["reason"] == f"The answer gives {given} but the page shows £83.00 for the orange thermos."
        assert t["parts"][1] == {"image": "shots/a.png"}
        verdicts.add(v["success"])
    assert verdicts == {True, False}
    # A rejection, or a verdict on a value the task names, gives no copies.
    no = json.loads(session["turns"][0]["output"])
    no["success"] = False
    assert augment.validator_swaps({"role": "validator", "turns": [dict(session["turns"][0],
                                   output=json.dumps(no))]}, random.Random(1), 4) == []
    named = dict(session["turns"][0], parts=[{"text": text.replace("orange thermos?", "£83.00 thermos?")}])
    assert augment.validator_swaps({"role": "validator", "turns": [named]}, random.Random(1), 4) == []
    for seed in range(50):
        typo = augment.typo(random.Random(seed), "Ivan Moreau")
        assert typo != "Ivan Moreau" and abs(len(typo) - len("Ivan Moreau")) <= 1


def check_variants():
    variants = augment.policy_variants(login_session(), random.Random(1), 10)
    assert variants, "a first turn with listed controls gives variants"
    for v in variants:
        t = v["turns"][0]
        text = t["parts"][0]["text"]
        action = json.loads(t["output"])["action"]
        listed = [e[0] for e in augment.listed(text)]
        assert action["element"] in listed, (action, listed)
        assert text.count("\nTask: ") == 1 and TASK not in text
        if action["type"] == "write":
            assert f'"{action["content"]}"' in text.split("\nTask: ")[1]


def main():
    check_value_swaps()
    check_answer_swaps()
    check_validator_swaps()
    check_variants()
    print("augment: ok")


if __name__ == "__main__":
    main()
