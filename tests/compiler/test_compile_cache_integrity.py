"""The compile cache never serves an entry whose bytes changed on disk: it is compiled again
and replaced, and a corrupt entry never surfaces as an exception."""
import json

import numpy as np
import pytest

from lowlevel import compiler
from lowlevel.compiler import cache

SOURCE = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LOWLEVEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def only_entry(folder, suffix):
    entries = list(folder.glob(f"*{suffix}"))
    assert len(entries) == 1, entries
    return entries[0]


def corrupt_same_size(path, rng, invalid_utf8=False):
    """Change some bytes of `path` in place, keeping its length (so a size check passes)."""
    data = bytearray(path.read_bytes())
    at = rng.choice(len(data), size=min(8, len(data)), replace=False)
    for i in at:
        data[i] = 0xFF if invalid_utf8 else (data[i] ^ 0x20) or 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("invalid_utf8", [False, True])
def test_a_changed_ptx_entry_is_recompiled_and_replaced(private_cache, rng, invalid_utf8):
    fresh = compiler.compile(SOURCE, "ptx", "sm_80")
    entry = only_entry(private_cache, ".bin")
    good = entry.read_bytes()
    corrupt_same_size(entry, rng, invalid_utf8)
    assert entry.read_bytes() != good
    assert compiler.compile(SOURCE, "ptx", "sm_80") == fresh          # not the changed bytes
    assert entry.read_bytes() == good                                 # the entry was replaced
    assert compiler.compile(SOURCE, "ptx", "sm_80") == fresh          # and is served again


def test_a_changed_cubin_entry_is_recompiled(private_cache, rng):
    fresh = compiler.compile(SOURCE, "cubin", "sm_90")
    entry = only_entry(private_cache, ".bin")
    corrupt_same_size(entry, rng)
    assert compiler.compile(SOURCE, "cubin", "sm_90") == fresh
    assert entry.read_bytes() == fresh


@pytest.mark.parametrize("damage", ["garbage", "invalid utf-8", "a list", "edited log", "no hash", "empty"])
def test_damaged_metadata_is_a_miss(private_cache, damage):
    fresh = compiler.compile(SOURCE, "ptx", "sm_80")
    meta_path = only_entry(private_cache, ".json")
    meta = json.loads(meta_path.read_text())
    replacement = {
        "garbage": b"{not json",
        "invalid utf-8": b"\xff\xfe{}",
        "a list": b"[1, 2]",
        "edited log": json.dumps({**meta, "log": "something else"}).encode(),
        "no hash": json.dumps({k: v for k, v in meta.items() if k != "sha256"}).encode(),
        "empty": b"",
    }[damage]
    meta_path.write_bytes(replacement)
    key = meta_path.stem
    assert cache.load(key) is None
    assert compiler.compile(SOURCE, "ptx", "sm_80") == fresh
    assert json.loads(meta_path.read_text()) == meta                  # rewritten whole
    assert cache.load(key) is not None


def test_an_intact_entry_round_trips_with_its_metadata(private_cache, rng):
    payload = rng.integers(0, 256, int(rng.integers(1, 4096)), dtype=np.uint8).tobytes()
    meta = {"log": "ptxas info", "lowered_names": {"scale<float>": "_Z5scaleIfEvPT_"}, "archs": (80, 90)}
    cache.store("k", payload, meta)
    got_payload, got_meta = cache.load("k")
    assert got_payload == payload
    assert got_meta["log"] == meta["log"] and got_meta["lowered_names"] == meta["lowered_names"]
    assert got_meta["archs"] == [80, 90]
    (private_cache / "k.bin").write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))
    assert cache.load("k") is None
