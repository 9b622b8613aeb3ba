"""`MiniLmEmbedder`: all-MiniLM-L6-v2 (or another BERT sentence encoder) on ONNX Runtime.

The model is the transformer itself, not a distillation (chalie/memory/minilm_onnx.py builds
its graph). In float32 its vectors equal those of sentence-transformers, so it shares their
vector space with memory.embedder = "local" and switching between them re-embeds nothing; in
int8 (memory.embed_precision, the default) they are within cosine 0.998 of those, in a space of
their own. No torch: ONNX Runtime on the CPU and Hugging Face's Rust tokenizer.

Costs (docs/benchmarks.md, Embedders and Turn overhead): on an AVX2 core without int8 dot
products, about 0.55 ms of one core a token (a 13-token question: 7.7-8.7 ms in int8, 6.3-7.5
in float32, which is faster there); on a core with them, 3.5 ms in int8. A server of about 150
MiB (195 in float32). One intra-op thread by default (memory.embed_threads): a turn's query and
a background batch each take one core.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnxruntime as ort
import structlog
from tokenizers import Tokenizer

from chalie.errors import EmbedError
from chalie.memory import heap
from chalie.memory.minilm_weights import Weights

log = structlog.get_logger("chalie.memory")

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2: longer is cut
# Texts per run. One: on an AVX2 core a batch costs more a text than texts run one by one (35
# words in int8: 24 ms a text alone, 34 in fours, 39 in sixteens; float32 18, 21, 27), and the
# activations ONNX Runtime keeps are one text's (at most MAX_TOKENS).
CHUNK = 1
MAX_CHARS = 4000  # as embedders.MAX_EMBED_CHARS: the tokenizer never sees more
WARM_UP = "hello there"  # embedded once at load (never stored)
# A two-word text takes 1.5 ms of CPU in int8 here (3 ms in float32) where ONNX Runtime computes
# 8-bit blocks in int8; where it unpacks them to float32 on every run instead, 29 ms.
SLOW_INT8_MS = 15.0



class MiniLmEmbedder:
    """A BERT sentence encoder on ONNX Runtime: semantic, in process, 384 dimensions for MiniLM.

    Thread-safe without a lock: InferenceSession.run may be called from several threads, and
    ONNX Runtime releases the GIL while it computes, so a turn's query does not wait for a
    background batch. `timeout_s` is not enforced (a run cannot be cut short; a short text
    takes milliseconds).
    """

    kind = "minilm"
    binary_knn = True
    # Computes on the calling thread: background batches go a few texts at a time (the GIL is
    # released while ONNX Runtime runs, but the cores are shared with user turns), which also
    # keeps the activations, and so the resident memory, small.
    in_process = True

    def __init__(self, weights: Weights, *, threads: int = 1,
                 slow_int8_ms: float = SLOW_INT8_MS) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # With more than one thread, the pool's threads would spin between runs (measured: 90
        # ms of CPU a turn instead of 27 with 2 threads): they sleep instead.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # ONNX Runtime's arena keeps the activations' buffers from run to run: one text's at a
        # time (CHUNK), for each thread running it. Without it, every run allocates and frees
        # them, and a long text's come straight from the system, zeroed page by page: a
        # 35-word text cost 30 ms of CPU instead of 23.
        options.enable_cpu_mem_arena = True
        options.log_severity_level = 3  # errors only: ORT's own warnings are not Chalie's
        try:
            self._session = ort.InferenceSession(str(weights.onnx), options,
                                                 providers=["CPUExecutionProvider"])
            self._tokenizer = Tokenizer.from_file(str(weights.tokenizer))
        except Exception as e:  # ORT and tokenizers raise their own kinds; one is needed here
            raise EmbedError(f"loading {weights.onnx}: {e}") from e
        heap.trim()  # the model file's bytes, copied into ORT's tensors, are freed now
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._pooled = self._session.get_outputs()[0].name == "embedding"
        meta = self._session.get_modelmeta().custom_metadata_map  # ours: the model's positions
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(min(MAX_TOKENS, int(meta.get("max_tokens", MAX_TOKENS))))
        self.space = weights.space  # float32: "local:all-MiniLM-L6-v2", as LocalEmbedder's
        self.origin = weights.origin
        self._warm_up(weights, slow_int8_ms)

    def _warm_up(self, weights: Weights, slow_int8_ms: float) -> None:
        """One short text now (the first run prepares ONNX Runtime's kernels); an int8 model
        that takes far longer than it should runs on a CPU ONNX Runtime has no int8 kernel for
        8-bit blocks on, and the log says what to change."""
        self.embed([WARM_UP], timeout_s=60.0)
        started = time.thread_time()  # CPU time: waiting for a busy core does not count
        self.embed([WARM_UP], timeout_s=60.0)
        ms = (time.thread_time() - started) * 1000
        if weights.int8 and ms > slow_int8_ms:
            log.warning("embed_int8_slow", ms=round(ms, 1), onnx=str(weights.onnx),
                        advice='this CPU computes 8-bit blocks slowly: set '
                               'memory.embed_precision = "float32"')

    def embed(self, texts: Sequence[str], *, timeout_s: float) -> list[bytes]:
        if not texts:
            return []
        try:
            encodings = self._tokenizer.encode_batch([t[:MAX_CHARS] for t in texts])
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            out: list[bytes] = [b""] * len(texts)
            for start in range(0, len(order), CHUNK):
                chunk = order[start:start + CHUNK]
                vectors = self._run([encodings[i].ids for i in chunk])
                for i, row in zip(chunk, vectors, strict=True):
                    out[i] = row.astype("<f4").tobytes()
        except EmbedError:
            raise
        except Exception as e:  # ORT raises its own kinds; the caller needs one
            raise EmbedError(f"embedding with {self.space} failed: {e}") from e
        if len(texts) > 1:
            heap.trim()
        return out

    def _run(self, rows: list[list[int]]) -> np.ndarray[Any, Any]:
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for n, r in enumerate(rows):
            ids[n, :len(r)] = r
            mask[n, :len(r)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:  # a graph exported elsewhere (embed_model_path)
            feed["token_type_ids"] = np.zeros_like(ids)
        result = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if not self._pooled:  # token vectors: mean over the real tokens, as Pooling does
            weights = mask[:, :, None].astype(np.float32)
            result = (result * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
            raise EmbedError(f"embedding with {self.space}: a vector is all zeros or not finite")
        unit: np.ndarray[Any, Any] = result / np.maximum(norms, 1e-12)
        return unit

    def close(self) -> None:
        pass
