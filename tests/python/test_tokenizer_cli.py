"""`gradkern tokenize`, `gradkern train --tokenizer` and `gradkern sample` with
a BPE model, on a small hand-made Hugging Face tokenizer.json: the ids equal
those of a plain Python GPT-2 BPE (for ASCII text, where Python's `re` can
write GPT-2's pattern), decode gives the text back, training on tokens
learns, the checkpoint names its tokenizer, sampling decodes with it and
refuses another one, and bad input gets a message and a non-zero exit.
(The agreement with GPT-2's own encoder on Unicode text and real corpora is
tests/tokenizer/run_gpt2_test.sh.)"""
import json
import os
import random
import re
import struct
import subprocess

import pytest

BIN = os.environ.get("GRADKERN_BIN")
pytestmark = pytest.mark.skipif(not BIN, reason="GRADKERN_BIN is not set (run through ctest)")


def byte_chars():
    """GPT-2's byte-to-unicode map: byte -> character."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(0x100 + n)
            n += 1
    return out


BYTE_CHAR = byte_chars()
WORDS = ["the", "and", "in", "then", "there", "hand", "thin", "an", "that", "this", "north", "sand"]
MERGES = [("t", "h"), ("th", "e"), ("\u0120", "th"), ("\u0120th", "e"), ("a", "n"), ("an", "d"), ("\u0120", "an"),
          ("\u0120an", "d"), ("i", "n"), ("\u0120", "in"), ("e", "n"), ("th", "en"), ("\u0120th", "en"), ("e", "r"),
          ("th", "er"), ("\u0120th", "er")]


def tokenizer_json(merges=MERGES, added=(("<|endoftext|>", None),)):
    """A tokenizer.json: the 256 byte tokens (id = byte), one token per merge
    result, the added tokens after them; merges alternately as "a b" and
    ["a", "b"]."""
    vocab = {BYTE_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added_tokens = []
    for content, _ in added:
        added_tokens.append({"id": len(vocab) + len(added_tokens), "content": content, "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": [("%s %s" % m) if i % 2 == 0 else list(m) for i, m in enumerate(merges)]},
    }


# GPT-2's pattern for ASCII text (\p{L} and \p{N} are [A-Za-z] and [0-9] there).
PATTERN = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def reference_encode(text, spec):
    """GPT-2's encoding, written plainly: split at added tokens, pre-tokenize,
    then merge the lowest-ranked pair everywhere until none is left."""
    vocab = spec["model"]["vocab"]
    ranks = {}
    for i, m in enumerate(spec["model"]["merges"]):
        ranks[tuple(m.split(" ") if isinstance(m, str) else m)] = i
    added = {t["content"]: t["id"] for t in spec["added_tokens"]}
    ids = []
    pieces = re.split("(%s)" % "|".join(re.escape(a) for a in added), text) if added else [text]
    for piece in pieces:
        if piece in added:
            ids.append(added[piece])
            continue
        for word in PATTERN.findall(piece):
            symbols = [BYTE_CHAR[b] for b in word.encode()]
            while len(symbols) > 1:
                pairs = [(ranks.get((a, b), 1 << 30), a, b) for a, b in zip(symbols, symbols[1:])]
                rank, a, b = min(pairs)
                if rank == 1 << 30:
                    break
                merged, i = [], 0
                while i < len(symbols):
                    if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                        merged.append(a + b)
                        i += 2
                    else:
                        merged.append(symbols[i])
                        i += 1
                symbols = merged
            ids.extend(vocab[s] for s in symbols)
    return ids


def random_text(seed, n_words):
    rng = random.Random(seed)
    seps = [" ", " ", " ", "  ", "\n", "\n\n", "\t", " \n ", ", ", ". ", "'s ", "'ll ", " 42 ", "!? ", "   "]
    out = []
    for _ in range(n_words):
        w = rng.choice(WORDS)
        out.append(w.capitalize() if rng.random() < 0.1 else w)
        out.append(rng.choice(seps))
        if rng.random() < 0.01:
            out.append("<|endoftext|>")
    return "".join(out)


def tokenize(tok, data, *flags):
    return subprocess.run([BIN, "tokenize", "--tokenizer", str(tok), *flags], input=data, capture_output=True,
                          timeout=300)


@pytest.fixture
def tok(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json()))
    return path


def test_ids_equal_the_reference_and_decode_round_trips(tok):
    spec = json.loads(tok.read_text())
    for seed, n in [(1, 50), (2, 2000), (3, 60000)]:
        text = random_text(seed, n)
        r = tokenize(tok, text.encode())
        assert r.returncode == 0, r.stderr.decode()
        ids = [int(x) for x in r.stdout.split()]
        assert ids == reference_encode(text, spec), "seed %d" % seed
        back = tokenize(tok, r.stdout, "--decode")
        assert back.returncode == 0, back.stderr.decode()
        assert back.stdout == text.encode()


def test_nfc_normalizer_equals_python(tmp_path):
    """A tokenizer.json with an NFC normalizer and no merges gives one id per
    byte of the normalized text: those bytes equal Python's
    unicodedata.normalize("NFC") for every code point that has a canonical
    decomposition (as it is, and decomposed), and for 2 MiB of random
    starters and combining marks (Hangul jamo included), read in pieces."""
    import unicodedata
    spec = tokenizer_json(merges=[], added=())
    spec["normalizer"] = {"type": "NFC"}
    tok = tmp_path / "nfc.json"
    tok.write_text(json.dumps(spec))
    decomposable = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF
                    and unicodedata.decomposition(chr(cp)) and not unicodedata.decomposition(chr(cp)).startswith("<")]
    hangul = [chr(cp) for cp in range(0xAC00, 0xD7A4, 7)]
    marks = [chr(cp) for cp in range(0x300, 0x370)] + ["\u093c", "\u0951", "\u05b0", "\u0f71", "\u302a", "\u1dce"]
    jamo = [chr(cp) for cp in list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))]
    starters = list("aeiouAEIOUnsczy ") + ["\u03b1", "\u03c9", "\u0928", "\u3046", "\n"] + hangul[:50]
    rng = random.Random(7)
    random_part = "".join(rng.choice(starters) if rng.random() < 0.45 else rng.choice(marks if rng.random() < 0.7
                                                                                      else jamo)
                          for _ in range(1 << 20))
    for text in [" ".join(decomposable), " ".join(unicodedata.normalize("NFD", c) for c in decomposable),
                 "".join(hangul), random_part]:
        r = tokenize(tok, text.encode())
        assert r.returncode == 0, r.stderr.decode()
        got = bytes(int(x) for x in r.stdout.split())
        want = unicodedata.normalize("NFC", text).encode()
        if got != want:
            at = next(i for i in range(min(len(got), len(want))) if got[i] != want[i])
            raise AssertionError("NFC differs from Python's at byte %d: %r vs %r" % (at, got[at - 12:at + 12],
                                                                                 want[at - 12:at + 12]))


def test_tokenize_bad_input(tok, tmp_path):
    r = subprocess.run([BIN, "tokenize", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--tokenizer PATH" in r.stdout and "--decode" in r.stdout
    r = subprocess.run([BIN, "tokenize"], capture_output=True, text=True)
    assert r.returncode == 2 and "--tokenizer PATH is required" in r.stderr
    r = subprocess.run([BIN, "tokenize", "--tokenizer", str(tok), "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "'--bogus'" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(tok.read_text()[:-40])
    r = tokenize(bad, b"hello")
    assert r.returncode == 1 and b"bad.json" in r.stderr and b"byte" in r.stderr
    r = tokenize(tok, b"1 2 999999\n", "--decode")
    assert r.returncode == 1 and b"input word 3: 999999 is not a token id" in r.stderr
    r = tokenize(tok, b"1 -2\n", "--decode")
    assert r.returncode == 1 and b"input word 2 '-2'" in r.stderr
    r = tokenize(tmp_path / "missing.json", b"x")
    assert r.returncode == 1 and b"missing.json" in r.stderr


def final_loss(out, which):
    m = re.search(r"final train loss ([0-9.]+), eval loss ([0-9.]+)", out)
    assert m, out
    return float(m.group(1 if which == "train" else 2))


def read_metadata(path):
    b = path.read_bytes()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n])["__metadata__"]


def test_train_on_tokens_and_sample(tok, tmp_path):
    data = tmp_path / "text.txt"
    data.write_text(random_text(7, 40000))
    ckpt = tmp_path / "run.safetensors"
    vocab = len(json.loads(tok.read_text())["model"]["vocab"]) + 1
    r = subprocess.run([BIN, "train", "--task", "text", "--data", str(data), "--tokenizer", str(tok), "--width", "32",
                        "--layers", "1", "--batch", "8", "--seq-len", "32", "--steps", "40", "--eval-every", "0",
                        "--eval-batches", "2", "--checkpoint", str(ckpt), "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    # A uniform guess costs ln(vocab) nats per token; the text has few distinct words.
    assert final_loss(r.stdout, "eval") < 0.6 * __import__("math").log(vocab), r.stdout
    meta = read_metadata(ckpt)
    assert meta["tokenizer"] == str(tok)
    assert "vocab=%d" % vocab in meta["config"] and "tokenizer=" in meta["config"]

    s = subprocess.run([BIN, "sample", "--checkpoint", str(ckpt), "--prompt", "the hand", "--tokens", "40",
                        "--seed", "3"], capture_output=True, timeout=300)
    assert s.returncode == 0, s.stderr.decode()
    words = set(re.findall(r"[a-z]+", s.stdout.decode().lower()))
    assert words and len(words & set(WORDS)) >= 2, s.stdout  # words of the text, written as bytes

    # Another tokenizer (one merge less) is refused, naming both fingerprints.
    other = tmp_path / "other.json"
    other.write_text(json.dumps(tokenizer_json(merges=MERGES[:-1])))
    s = subprocess.run([BIN, "sample", "--checkpoint", str(ckpt), "--tokenizer", str(other), "--tokens", "5"],
                       capture_output=True, text=True, timeout=300)
    assert s.returncode == 1 and "is not the one the model was trained with" in s.stderr
    # The tokenizer moved: a message says how to give it.
    moved = tmp_path / "moved.json"
    tok.rename(moved)
    s = subprocess.run([BIN, "sample", "--checkpoint", str(ckpt), "--tokens", "5"], capture_output=True, text=True,
                       timeout=300)
    assert s.returncode == 1 and "--tokenizer PATH" in s.stderr
    s = subprocess.run([BIN, "sample", "--checkpoint", str(ckpt), "--tokenizer", str(moved), "--tokens", "5"],
                       capture_output=True, timeout=300)
    assert s.returncode == 0, s.stderr.decode()


def test_tokenizer_needs_text_task(tok):
    r = subprocess.run([BIN, "train", "--task", "copy", "--tokenizer", str(tok), "--steps", "1"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "--tokenizer" in r.stderr and "--task text" in r.stderr
