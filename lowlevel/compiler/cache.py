"""An on-disk cache of compiled code, keyed by everything that decides the output.

The key is a hash of the kind of step, the source, the options, the architecture and the
toolkit versions, so a new NVRTC or a changed flag is a miss, never a stale hit. Entries
are written to a temporary file and renamed into place, which is atomic: processes that
compile the same thing at once each write a whole entry, and readers never see half of one.
Each entry's metadata holds a SHA-256 of the payload and of the metadata itself: an entry
whose bytes changed on disk (a bad sector, a stray edit, a torn copy) is a miss, so it is
compiled again and replaced, never served.

Where: $LOWLEVEL_CACHE_DIR, else $XDG_CACHE_HOME/lowlevel, else ~/.cache/lowlevel.
Off: LOWLEVEL_CACHE=0.
"""
import hashlib
import json
import os
import pathlib
import tempfile


def enabled() -> bool:
    return os.environ.get("LOWLEVEL_CACHE", "1") not in ("0", "off", "false", "")


def directory() -> pathlib.Path:
    explicit = os.environ.get("LOWLEVEL_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "lowlevel"


def key(*parts) -> str:
    """A stable hash of the parts (strings, bytes, numbers, tuples of them)."""
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _digest(payload: bytes, meta: dict) -> str:
    """The hash an entry is stored with: its payload and its metadata (less the hash)."""
    return key(payload, meta)


def load(k: str) -> tuple[bytes, dict] | None:
    """(payload, metadata) of entry `k`, or None on a miss (or with the cache off). An
    entry that does not match its stored hash is a miss too."""
    if not enabled():
        return None
    folder = directory()
    try:
        payload = (folder / f"{k}.bin").read_bytes()
        meta = json.loads((folder / f"{k}.json").read_bytes())
    except (OSError, ValueError):       # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(meta, dict):
        return None
    stored = meta.pop("sha256", None)
    if meta.get("size") != len(payload) or stored != _digest(payload, meta):
        return None             # torn by an interrupted writer, or changed since: a miss
    return payload, meta


def _write_atomically(path: pathlib.Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(k: str, payload: bytes, meta: dict) -> None:
    """Save an entry; a cache that cannot be written is skipped, not an error."""
    if not enabled():
        return
    folder = directory()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # The payload first: a reader accepts an entry only once its metadata (with the
        # payload's size) is in place.
        _write_atomically(folder / f"{k}.bin", payload)
        # Hashed as a reader will see it, after the trip through JSON (tuples become lists).
        meta = json.loads(json.dumps({**meta, "size": len(payload)}))
        _write_atomically(folder / f"{k}.json", json.dumps({**meta, "sha256": _digest(payload, meta)}).encode())
    except OSError:
        pass


def clear() -> int:
    """Remove every entry; returns how many files went."""
    folder = directory()
    count = 0
    if folder.is_dir():
        for p in folder.iterdir():
            if p.suffix in (".bin", ".json"):
                p.unlink(missing_ok=True)
                count += 1
    return count
