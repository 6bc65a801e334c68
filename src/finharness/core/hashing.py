"""Content keys: the canonical JSON encoding and the sha256 keys built on it (run keys, call keys).

Below the run store, which stores rows under these keys; anything that must name a call or a run the way
the store does (a fake backend keying its replies, the rater app, replay) imports them from here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# json.dumps with these options builds this very encoder on every call; made once, it encodes the same bytes.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical_json(obj: Any) -> str:
    """Sorted keys, no spaces, non-ASCII kept: one text per value, whoever encodes it."""
    return _CANONICAL_ENCODER.encode(obj)


def content_key(*parts: Any) -> str:
    """sha256 of the canonical JSON array of `parts`."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def content_key_of_canonical(*canonical_parts: str) -> str:
    """content_key(*parts), given canonical_json(part) for each part: a JSON array is its items'
    encodings joined by ',' in brackets, so a part already encoded (the request stored beside the
    key, the backend identity) is not encoded again. Same bytes, same key."""
    return hashlib.sha256(("[" + ",".join(canonical_parts) + "]").encode("utf-8")).hexdigest()
