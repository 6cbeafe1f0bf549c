#!/usr/bin/env python3
"""Parity fixtures for surf's tokenizer (model/tokenizer.*), produced with Hugging Face `tokenizers`.

Trains three small byte-level / char-level BPE tokenizers and records what HF encodes and decodes for a
corpus of varied strings. The C++ test (tests/unit/test_tokenizer.cpp) must reproduce every id and every
decoded string exactly.

  tekken_like/   the Nemotron-H / Mistral-NeMo "Tekken" layout: pre_tokenizer
                 Sequence[Split(Tekken regex, Isolated), ByteLevel(add_prefix_space=False, use_regex=False)],
                 decoder ByteLevel, control tokens <unk> <s> </s> <SPECIAL_3>..<SPECIAL_19> (ids 0..19),
                 added special tokens <image> <img> </img> and a non-ASCII special token, non-special added
                 tokens <think> </think>. Corpus of >= 2,000 strings.
  gpt2_like/     ByteLevel(add_prefix_space=True, use_regex=True), ignore_merges=True, merges saved as
                 "a b" strings, added tokens with lstrip / rstrip / single_word.
  fallback_like/ char-level BPE (no ByteLevel) with byte_fallback, <unk>, a Split(Removed / MergedWithNext)
                 pre-tokenizer, a Replace normalizer and decoder Sequence[Replace, ByteFallback, Fuse, Strip].

Usage: python3 tests/reference/make_tokenizer_fixture.py [OUT_DIR]   (default tests/fixtures/tokenizer)
Training text is the docstrings and sources of this Python's standard library plus hand-written
multilingual sentences, so a rerun on another Python gives a different (equally valid) fixture.
"""

import hashlib
import inspect
import json
import os
import pkgutil
import random
import sys
import sysconfig
import unicodedata
import importlib
import warnings

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SEED = 20240611
# The pre-tokenizer regex of the Tekken / Nemotron-H tokenizer (NeMo TiktokenTokenizer PATTERN_TIKTOKEN,
# the Split pattern in Mistral-NeMo's and Nemotron-H's tokenizer.json).
TEKKEN_PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CONTROL_TOKENS = ["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{k}>" for k in range(3, 20)]
VL_TOKENS = ["<image>", "<img>", "</img>"]

MULTILINGUAL = [
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Où est la bibliothèque? Près de l'église, à côté du café.",
    "Ça coûte vingt-cinq euros; c'est très cher, n'est-ce pas?",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Größere Straßen führen zur Universität in München.",
    "El niño comió una piña en la mañana del miércoles.",
    "¿Dónde está el baño? ¡Qué sorpresa!",
    "Tiếng Việt có nhiều dấu: ằ, ẳ, ẵ, ặ, ế, ệ, ở, ữ.",
    "Ελληνικά: Καλημέρα κόσμε, τι κάνεις;",
    "Русский язык: Съешь же ещё этих мягких французских булок.",
    "Українська мова: Гей, хлопці, вставаймо!",
    "日本語の文章です。東京は大きな都市です。",
    "カタカナとひらがなを混ぜた文：コンピューターを使います。",
    "中文：我们今天去公园散步，天气很好。",
    "繁體中文：這是一個測試句子。",
    "한국어 문장입니다. 서울은 대한민국의 수도입니다.",
    "العربية: مرحبا بالعالم، كيف حالك اليوم؟",
    "עברית: שלום עולם, מה שלומך?",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "ไทย: สวัสดีชาวโลก วันนี้อากาศดีมาก",
    "Türkçe: Çok güzel bir gün, değil mi? İstanbul'da ışıklar.",
    "Polski: Zażółć gęślą jaźń. Łódź i Kraków.",
    "Čeština: Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Íslenska: Þú ert ótrúlegur, Ægir.",
    "Emoji: 😀 😃 😄 👍🏽 👩‍💻 🇫🇷 🇯🇵 ❤️ 🧑‍🤝‍🧑 🏳️‍🌈",
]
EMOJI = ["😀", "🎉", "👍", "👍🏿", "👩‍👩‍👧‍👦", "🇺🇸", "🇩🇪", "❤️", "✅", "🚀", "🤖", "🧪", "☕", "⚡", "🐍", "🦀",
         "🏳️‍⚧️", "👨🏻‍💻", "🫠", "🥲", "🪐", "©️", "®", "™", "🔥", "💯"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\t\t", "\u00a0", "\u3000", "\u2003",
          "\u2009", "\u200b", "\u0085", "\u2028", "\u180e", "\x0b", "\x0c", "\u202f", "\u205f"]
CODE = [
    "def f(x):\n    return x ** 2\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); }",
    "const x = {a: 1, b: [2, 3]}; // comment",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "<div class=\"btn btn-primary\" onclick=\"go()\">Click&nbsp;me</div>",
    "{\"action\": \"click\", \"x\": 512, \"y\": 384, \"element\": \"#submit\"}",
    "https://www.example.com/path/to/page?query=1&lang=en#section-2",
    "fn main() { let v: Vec<u8> = vec![0xff; 16]; println!(\"{:?}\", v); }",
    "$ ls -la /usr/local/bin | grep -E '^-rwx' > out.txt 2>&1",
]


def training_text(rng):
    """English docstrings and code from the standard library, plus multilingual and whitespace samples."""
    stdlib = sysconfig.get_paths()["stdlib"]
    texts = []
    names = sorted(m.name for m in pkgutil.iter_modules([stdlib]) if not m.name.startswith("_"))
    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "lib2to3", "ensurepip", "venv",
            "pydoc", "webbrowser", "test", "distutils", "sqlite3", "curses", "dbm", "crypt", "nis", "spwd",
            "ossaudiodev", "msilib", "winreg", "winsound", "_msi"}
    warnings.simplefilter("ignore")
    for name in names:
        if name in skip:
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        doc = inspect.getdoc(module)
        if doc:
            texts.append(doc)
        for _, member in sorted(vars(module).items()):
            if inspect.isfunction(member) or inspect.isclass(member):
                doc = inspect.getdoc(member)
                if doc and len(doc) > 40:
                    texts.append(doc)
    code_files = sorted(os.path.join(stdlib, f) for f in os.listdir(stdlib) if f.endswith(".py"))
    for path in code_files[:60]:
        with open(path, encoding="utf-8", errors="replace") as handle:
            texts.append(handle.read())
    texts += MULTILINGUAL * 20 + CODE * 20
    texts += ["".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 8))) for _ in range(200)]
    texts += ["".join(rng.choice(SPACES) for _ in range(rng.randint(1, 12))) for _ in range(200)]
    return texts


def english_sentences(texts, rng, count):
    words = " ".join(t for t in texts[:3000] if t.isascii()).split()
    out = []
    for _ in range(count):
        start = rng.randrange(0, max(1, len(words) - 40))
        out.append(" ".join(words[start:start + rng.randint(1, 40)]))
    return out


def random_unicode(rng, length):
    """Characters assigned in Unicode 14 (PCRE2 10.42's and this Python's version), any category but
    surrogates / private use / unassigned."""
    chars = []
    while len(chars) < length:
        plane = rng.random()
        if plane < 0.5:
            cp = rng.randint(0x20, 0x2FFF)
        elif plane < 0.8:
            cp = rng.randint(0x3000, 0xFFFD)
        else:
            cp = rng.randint(0x10000, 0x2FFFF)
        cat = unicodedata.category(chr(cp))
        if cat in ("Cs", "Co", "Cn"):
            continue
        chars.append(chr(cp))
    return "".join(chars)


def corpus_strings(texts, rng, specials):
    out = []
    out += english_sentences(texts, rng, 500)
    code_texts = [t for t in texts if "def " in t or "import " in t]
    for _ in range(300):
        t = rng.choice(code_texts)
        s = rng.randrange(0, max(1, len(t) - 300))
        out.append(t[s:s + rng.randint(1, 300)])
    out += CODE + MULTILINGUAL
    for _ in range(200):  # accents and mixed scripts
        base = rng.choice(MULTILINGUAL)
        s = rng.randrange(0, len(base))
        out.append(base[s:s + rng.randint(1, 40)] + rng.choice(["", " ", "é", "ñ", "ß", "ç", "e\u0301", "A\u030a"]))
    for _ in range(200):  # CJK runs
        out.append("".join(chr(rng.randint(0x4E00, 0x9FFF)) if rng.random() < 0.8 else rng.choice("。、，！？ abc123")
                           for _ in range(rng.randint(1, 60))))
    for _ in range(150):  # emoji, with and without text
        out.append("".join(rng.choice(EMOJI + [" ", "ok", "\n", "Hi"]) for _ in range(rng.randint(1, 12))))
    for _ in range(200):  # long whitespace runs, tabs, newlines between words
        pieces = []
        for _ in range(rng.randint(1, 8)):
            pieces.append(rng.choice(["word", "x", "Hello", "42", "é", "中", "", "(", "}"]))
            pieces.append("".join(rng.choice(SPACES) for _ in range(rng.randint(1, 40))))
        out.append("".join(pieces))
    for _ in range(300):  # special tokens inline, partial and malformed special tokens
        pieces = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.4:
                pieces.append(rng.choice(specials))
            elif r < 0.55:
                tok = rng.choice(specials)
                pieces.append(tok[:rng.randint(1, len(tok))])
            elif r < 0.65:
                pieces.append(rng.choice(["<", ">", "</", "<<", ">>", "< s>", "<s >", "<SPECIAL_>", "<SPECIAL_999>",
                                          "<0x41>", "<image", "image>"]))
            else:
                pieces.append(rng.choice(["User\n", "Assistant\n", "System\n", " hello", "\n", " ", "click(3, 4)",
                                          "é", "中文", "😀", "  ", "\t"]))
        out.append("".join(pieces))
    for _ in range(200):  # random assigned code points
        out.append(random_unicode(rng, rng.randint(1, 30)))
    for _ in range(100):  # invalid-looking sequences
        out.append(rng.choice(["\ufffd", "\\xff\\xfe", "\x00", "\x01\x02\x1b[0m", "\ufeff", "\u200d", "\u202e",
                               "%C3%A9", "&#x1F600;", "\\u00e9", "Ã©", "â€™", "\U0001F3FB", "\u0301", "\uffff"])
                   + rng.choice(["", "a", " b", "中", "\n"]) + rng.choice(["\ufffd", "\x7f", "\u0000", ""]))
    for _ in range(150):  # numbers, URLs, markup
        out.append(rng.choice([
            f"{rng.randint(0, 10**9)}", f"{rng.random() * 1000:.4f}", f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}",
            f"https://example.org/{rng.randint(0, 999)}/item?id={rng.randint(0, 99999)}",
            f"<a href=\"/p/{rng.randint(0, 99)}\">link {rng.randint(0, 9)}</a>",
            f"[{rng.randint(0, 9)}, {rng.randint(0, 9)}]", "1,234,567.89", "3.14159e-10", "0x7fffffff", "2024-06-11T12:00:00Z",
        ]))
    out += ["", " ", "a", "\n", "  leading", "trailing  ", "A" * 500, "ab" * 300, " " * 300, "\n" * 50,
            "x\u0085y", "a\u180eb", "\u180e", "end\u2028line"]
    return out


def encode_cases(tok, strings, with_no_special=True):
    cases = []
    for s in strings:
        tok.encode_special_tokens = False
        ids = tok.encode(s, add_special_tokens=False).ids
        case = {"text": s, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)}
        if with_no_special:
            tok.encode_special_tokens = True
            case["ids_no_special"] = tok.encode(s, add_special_tokens=False).ids
            tok.encode_special_tokens = False
        cases.append(case)
    return cases


def decode_cases(tok, rng, count):
    n = tok.get_vocab_size(with_added_tokens=True)
    cases = []
    for _ in range(count):
        ids = [rng.randrange(0, n) for _ in range(rng.randint(1, 12))]
        cases.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return cases


def save(out_dir, name, tok_json, payload):
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as handle:
        handle.write(tok_json)
    with open(os.path.join(path, "cases.json"), "w", encoding="utf-8") as handle:
        json.dump(payload, handle, ensure_ascii=True, separators=(",", ":"))
    return {f: hashlib.sha256(open(os.path.join(path, f), "rb").read()).hexdigest()
            for f in ("tokenizer.json", "cases.json")}


def make_tekken_like(texts, rng, out_dir):
    tok = Tokenizer(models.BPE(ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(TEKKEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=4000, special_tokens=CONTROL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VL_TOKENS + ["<|图片|>"]])
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
    specials = CONTROL_TOKENS + VL_TOKENS + ["<|图片|>", "<think>", "</think>"]
    strings = corpus_strings(texts, rng, specials)
    payload = {"encode": encode_cases(tok, strings), "decode": decode_cases(tok, rng, 400),
               "vocab_size": tok.get_vocab_size(with_added_tokens=True)}
    return save(out_dir, "tekken_like", tok.to_str(pretty=False), payload), len(strings)


def make_gpt2_like(texts, rng, out_dir):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, normalized=False),
                            AddedToken("<rs>", special=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("[SW]", single_word=True, special=False)])
    # Rewrite merges as "a b" strings (the older tokenizer.json form) and reload, so HF's outputs below
    # come from exactly the file we ship.
    data = json.loads(tok.to_str())
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    tok_json = json.dumps(data, ensure_ascii=False)
    tok = Tokenizer.from_str(tok_json)
    specials = ["<|endoftext|>", "<mask>", "<rs>", "[SW]", " <mask> ", "  <rs>  ", "a[SW]", "[SW]b", " [SW] "]
    strings = corpus_strings(texts, rng, specials)[::5]
    payload = {"encode": encode_cases(tok, strings), "decode": decode_cases(tok, rng, 100),
               "vocab_size": tok.get_vocab_size(with_added_tokens=True)}
    return save(out_dir, "gpt2_like", tok_json, payload), len(strings)


def make_fallback_like(texts, rng, out_dir):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  limit_alphabet=120)
    tok.train_from_iterator(texts, trainer=trainer)
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    # Byte tokens after the control tokens, as in Llama-style SentencePiece vocabularies.
    shifted = {k: (v if v < 3 else v + 256) for k, v in vocab.items()}
    for b in range(256):
        shifted[f"<0x{b:02X}>"] = 3 + b
    data["model"]["vocab"] = shifted
    for added in data["added_tokens"]:
        added["id"] = shifted[added["content"]]
    tok_json = json.dumps(data, ensure_ascii=False)
    tok = Tokenizer.from_str(tok_json)
    specials = ["<unk>", "<s>", "</s>"]
    strings = corpus_strings(texts, rng, specials)[1::5]
    payload = {"encode": encode_cases(tok, strings), "decode": decode_cases(tok, rng, 100),
               "vocab_size": tok.get_vocab_size(with_added_tokens=True)}
    return save(out_dir, "fallback_like", tok_json, payload), len(strings)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                                                   "tokenizer")
    rng = random.Random(SEED)
    texts = training_text(rng)
    sums = {}
    counts = {}
    for name, fn in (("tekken_like", make_tekken_like), ("gpt2_like", make_gpt2_like),
                     ("fallback_like", make_fallback_like)):
        sums[name], counts[name] = fn(texts, random.Random(SEED + len(name)), out_dir)
    with open(os.path.join(out_dir, "MANIFEST.md"), "w", encoding="utf-8") as handle:
        handle.write("# Tokenizer parity fixtures\n\n")
        handle.write("Generated by `tests/reference/make_tokenizer_fixture.py` (seed %d).\n\n" % SEED)
        handle.write("- tokenizers %s, Python %s, unicodedata %s\n" % (
            tokenizers.__version__, sys.version.split()[0], unicodedata.unidata_version))
        handle.write("- training text: this Python's stdlib docstrings and sources + hand-written samples\n")
        handle.write("- cases.json: `encode` (text, ids, ids_no_special = encode_special_tokens=True, decoded, "
                     "decoded_skip_special; all with add_special_tokens=False), `decode` (random ids)\n\n")
        for name in sums:
            handle.write("## %s (%d encode strings)\n" % (name, counts[name]))
            for f, digest in sums[name].items():
                handle.write("- %s sha256 %s\n" % (f, digest))
            handle.write("\n")
    print(counts)


if __name__ == "__main__":
    main()
