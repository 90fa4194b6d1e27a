"""gradkern's safetensors files and SVG plots, checked from Python.

- a file written by the C writer (tests/nn_helper.c) is read by a small
  parser written here, independently of the C code, and every tensor is
  compared with torch tensors computed from the same formulas (bf16 and f16
  rounded by torch); the layout rules of the format are checked on the raw
  bytes (header length, padding, offsets, alignment);
- a file written here (another tensor order, torch's own bytes) is read by
  the C reader and dumped back exactly;
- corrupted and truncated files make the C reader fail with a message;
- the Python `safetensors` package, when installed, reads the C file too;
- an SVG plot parses with xml.etree and its curves lie inside the picture.

Run: GRADKERN_NN_HELPER=build/tests/nn_helper /usr/bin/python3 -m pytest -q tests/python
"""
import json
import math
import os
import struct
import subprocess
import xml.etree.ElementTree as ET

import pytest
import torch

_REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HELPER = os.environ.get("GRADKERN_NN_HELPER", os.path.join(_REPO, "build", "tests", "nn_helper"))

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8}
SIZES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "U8": 1}
UNICODE_NAME = 'name "quoted" \\ \u00e9 \u2713'


def helper(*args, check=True):
    if not os.path.exists(HELPER):
        pytest.fail("nn_helper is not built (set GRADKERN_NN_HELPER or build into build/)")
    r = subprocess.run([HELPER, *args], capture_output=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr.decode()
    return r


# ---------------------------------------------------------------- a parser written from the format's description

def parse(raw):
    """(header dict, metadata dict, {name: (dtype, shape, bytes)}) of a safetensors file, checking its layout."""
    assert len(raw) >= 8
    (n,) = struct.unpack("<Q", raw[:8])
    assert 8 + n <= len(raw)
    header_bytes = raw[8:8 + n]
    assert header_bytes[:1] == b"{"
    header = json.loads(header_bytes.decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    tensors, spans = {}, []
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        assert end - begin == count * SIZES[info["dtype"]]
        tensors[name] = (info["dtype"], info["shape"], data[begin:end])
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        assert begin == pos, "the tensors tile the data section"
        pos = end
    assert pos == len(data)
    return header, meta, tensors, n


def to_torch(dtype, shape, buf):
    if not buf:
        return torch.empty(shape, dtype=DTYPES[dtype])
    return torch.frombuffer(bytearray(buf), dtype=DTYPES[dtype]).reshape(shape)


def expected():
    """The tensors nn_helper writes, from the same formulas, computed by torch."""
    f32 = torch.tensor([i * 0.25 - 1 for i in range(6)], dtype=torch.float32)
    u8 = torch.tensor([(250 + i) & 255 for i in range(7)], dtype=torch.uint8)
    return {
        "u8": u8,
        "f32": f32.reshape(2, 3),
        "f16": torch.tensor([i / 3.0 - 0.5 for i in range(6)], dtype=torch.float32)
        .to(torch.float16).reshape(3, 1, 2),
        "f64": torch.tensor([1.0 / (i + 3) for i in range(4)], dtype=torch.float64),
        "bf16": (torch.arange(5, dtype=torch.float32) * torch.tensor(1.1, dtype=torch.float32)
                 - torch.tensor(2.0, dtype=torch.float32)).to(torch.bfloat16),
        "i32": torch.tensor([(i - 2) * 100000 for i in range(4)], dtype=torch.int32).reshape(2, 2),
        "i64": torch.tensor([1 << (33 + i) for i in range(3)], dtype=torch.int64),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
        "empty": torch.empty(0, 3, dtype=torch.float32),
        "layers.0.big": (torch.tensor([(i % 97) * 0.125 - 3.0 for i in range(64 * 33)], dtype=torch.float32)
                         .reshape(64, 33)),
        UNICODE_NAME: u8[:1],
    }


EXPECTED_META = {"format": "pt", "config": '{"model": "mamba", "layers": 2}',
                 "unicode": "\u00e9 \u2713 \U0001F600", "quote": 'a "b" \\ c\nd\te\x01'}


@pytest.fixture(scope="module")
def c_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("st") / "c.safetensors")
    helper("safetensors", path)
    with open(path, "rb") as f:
        return path, f.read()


def test_c_file_read_by_python(c_file):
    _, raw = c_file
    header, meta, tensors, n = parse(raw)
    assert n % 8 == 0, "header padded so the data starts 8-aligned"
    assert raw[8:8 + n].rstrip(b" ").endswith(b"}"), "the JSON object, then only spaces"
    assert meta == EXPECTED_META
    want = expected()
    assert set(tensors) == set(want)
    for name, t in want.items():
        dtype, shape, buf = tensors[name]
        assert DTYPES[dtype] == t.dtype, name
        assert list(shape) == list(t.shape), name
        got = to_torch(dtype, shape, buf)
        assert torch.equal(got, t), "%s: %s != %s" % (name, got, t)
    # Every tensor starts at a multiple of its element size (sorted by size).
    for name, info in header.items():
        assert info["data_offsets"][0] % SIZES[info["dtype"]] == 0, name
    order = sorted(header.values(), key=lambda i: i["data_offsets"][0])
    sizes = [SIZES[i["dtype"]] for i in order]
    assert sizes == sorted(sizes, reverse=True)


def write_python(path, tensors, meta=None, pad=True, order=None):
    """A safetensors file written here: tensors in `order` (default: by name)."""
    header, chunks, offset = {}, [], 0
    names = order or sorted(tensors)
    for name in names:
        t = tensors[name].contiguous()
        buf = t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes()
        dtype = [k for k, v in DTYPES.items() if v == t.dtype][0]
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(buf)]}
        chunks.append(buf)
        offset += len(buf)
    if meta is not None:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def dump(path):
    r = helper("dump", path)
    lines = [json.loads(line) for line in r.stdout.decode().splitlines()]
    tensors = {d["name"]: d for d in lines if "name" in d}
    meta = {d["meta"]: d["value"] for d in lines if "meta" in d}
    return tensors, meta


def test_python_file_read_by_c(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "a.weight": torch.randn(5, 7, generator=g),
        "b16": torch.randn(9, generator=g).to(torch.bfloat16),
        "h": torch.randn(3, 3, generator=g).to(torch.float16),
        "d": torch.randn(2, 2, 2, generator=g).double(),
        "ids": torch.randint(-1000, 1000, (11,), generator=g, dtype=torch.int32),
        "steps": torch.tensor([0, 1 << 40, -5], dtype=torch.int64),
        "bytes": torch.arange(13, dtype=torch.uint8),
        "zero": torch.zeros(0, dtype=torch.float32),
        "\u00fcnicode \u2713": torch.ones(1),
    }
    meta = {"step": "10", "note": "line\nbreak \"quoted\" \u00e9"}
    # Unpadded header and an order that mixes element sizes: valid, so read.
    path = str(tmp_path / "py.safetensors")
    write_python(path, tensors, meta, pad=False, order=["bytes", "h", "a.weight", "zero", "d", "b16", "ids",
                                                         "steps", "\u00fcnicode \u2713"])
    got, got_meta = dump(path)
    assert got_meta == meta
    assert set(got) == set(tensors)
    for name, t in tensors.items():
        d = got[name]
        assert DTYPES[d["dtype"]] == t.dtype and d["shape"] == list(t.shape), name
        back = to_torch(d["dtype"], d["shape"], bytes.fromhex(d["hex"]))
        assert torch.equal(back, t), name


@pytest.mark.parametrize("case,needle", [
    ("truncated", "truncated"),
    ("overlap", "overlap"),
    ("duplicate", "appears twice"),
    ("bad_dtype", "unsupported dtype"),
    ("wrong_size", "needs"),
    ("not_json", "header byte"),
    ("huge_length", "runs past the end of the file"),
    ("empty_file", "fewer than the 8"),
])
def test_c_rejects_bad_files(tmp_path, case, needle):
    path = str(tmp_path / ("%s.safetensors" % case))
    t = {"x": torch.arange(4, dtype=torch.float32), "y": torch.arange(2, dtype=torch.float64)}
    write_python(path, t)
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    if case == "truncated":
        raw = raw[:-3]
    elif case == "not_json":
        raw = raw[:8] + b"{'x'" + raw[12:]
    elif case == "huge_length":
        raw = struct.pack("<Q", 1 << 40) + raw[8:]
    elif case == "empty_file":
        raw = b""
    else:
        if case == "overlap":
            header["y"]["data_offsets"] = [8, 24]
        elif case == "bad_dtype":
            header["x"]["dtype"] = "F8_E5M2"
        elif case == "wrong_size":
            header["x"]["shape"] = [5]
        text = json.dumps(header).encode()
        if case == "duplicate":
            text = text[:-1] + b', "x": ' + json.dumps(header["x"]).encode() + b"}"
        raw = struct.pack("<Q", len(text)) + text + raw[8 + n:]
    with open(path, "wb") as f:
        f.write(raw)
    r = helper("dump", path, check=False)
    assert r.returncode == 1, (case, r.stdout)
    msg = r.stderr.decode()
    assert needle in msg and path in msg, msg


@pytest.mark.parametrize("log", [False, True])
def test_svg_plot(tmp_path, log):
    path = str(tmp_path / "loss.svg")
    helper("plot", path, *(["log"] if log else []))
    root = ET.parse(path).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    w, h = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == "0 0 %g %g" % (w, h)
    lines = root.findall(".//s:polyline", ns)
    assert len(lines) == 2
    npoints = []
    for line in lines:
        pts = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        npoints.append(len(pts))
        assert all(0 <= x <= w and 0 <= y <= h for x, y in pts)
    assert npoints == [500, 10]
    # The training curve falls: its last point is lower on the page than its first is.
    first = [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]
    assert first[-1][1] > first[0][1] and first[-1][0] > first[0][0]
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for label in ["mamba, selective copying", "step", "loss (nats per token)", "train loss", "eval loss"]:
        assert label in texts, label
    assert len(root.findall(".//s:circle", ns)) == 10 + 1
    if log:
        assert "0.01" in texts and "1" in texts and "10" in texts
    else:
        assert "500" in texts and "0" in texts
