"""Sealing: state that quotes a dataset, committed so that only a holder of that dataset can read it.

A campaign's LM cache holds the model's replies, and on LoCoMo those quote the conversations (an
extraction that copies the messages, a worked example, a judged answer). LoCoMo is CC BY-NC and must
not be committed into the project, yet the cache is what lets a campaign continue on a fresh machine
without paying for its LM calls again. Sealing encrypts such state (AES-256-GCM) with a key derived
from the dataset file's bytes: a clone plus the user's own copy of the data can continue the campaign;
the repository alone reveals nothing of the data.

Deterministic on purpose: the nonce is a MAC of the plaintext under the key (the SIV construction), so
the same bytes seal to the same blob and an append-only chunk stays one git object. Equal plaintexts
giving equal blobs is all an observer learns, and the plaintexts are gzip chunks of distinct entries.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memtrace_opt.errors import ConfigError

__all__ = ["SEALED_SUFFIX", "dataset_key", "seal", "unseal"]

SEALED_SUFFIX = ".sealed"
_MAGIC = b"MTSEAL1\n"
_LABEL = b"memtrace-opt campaign seal v1\x00"
_NONCE = 12


def dataset_key(path: str | Path) -> bytes:
    """The 32-byte key of state sealed to the dataset file at ``path`` (its content, not its name)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as err:
        raise ConfigError(str(path), None, f"cannot read the dataset the campaign state is sealed to: {err.strerror}") from None
    return hashlib.sha256(_LABEL + digest.digest()).digest()


def seal(data: bytes, key: bytes) -> bytes:
    """``data`` encrypted and authenticated under ``key``; the same input always gives the same output."""
    nonce = hmac.new(key, data, hashlib.sha256).digest()[:_NONCE]
    return _MAGIC + nonce + AESGCM(key).encrypt(nonce, data, _MAGIC)


def unseal(blob: bytes, key: bytes, *, where: str) -> bytes:
    """The bytes :func:`seal` sealed; a ConfigError naming ``where`` when the key or the blob is wrong."""
    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + _NONCE + 16:
        raise ConfigError(where, None, "not a sealed file (it lacks the seal header)")
    nonce = blob[len(_MAGIC):len(_MAGIC) + _NONCE]
    try:
        return AESGCM(key).decrypt(nonce, blob[len(_MAGIC) + _NONCE:], _MAGIC)
    except InvalidTag:
        raise ConfigError(where, None, "cannot be unsealed with this dataset file: it was sealed to another "
                                       "copy of the data, or it is damaged (restore it from git)") from None
