"""A tiny BERT sentence encoder made on the spot (random weights, a WordPiece vocabulary of a
few dozen words) in the files of a Hugging Face checkpoint, and a plain numpy forward pass of
it: what the "minilm" tests convert, fetch and compare against."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

HIDDEN, LAYERS, HEADS, INNER, POSITIONS = 32, 2, 4, 64, 64
WORDS = ["the", "cat", "sat", "on", "mat", "a", "kitten", "dog", "car", "road", "drive",
         "play", "ball", "red", "blue", "green", "i", "you", "like", "love", "hate", "run",
         "fast", "slow", "happy", "sad", "##s", "##ing", "##ed"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "!", *WORDS]
CONFIG = {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
          "intermediate_size": INNER, "max_position_embeddings": POSITIONS,
          "vocab_size": len(VOCAB), "type_vocab_size": 2, "layer_norm_eps": 1e-12,
          "hidden_act": "gelu", "model_type": "bert"}


def weights(seed: int = 7) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.2) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": normal(len(VOCAB), HIDDEN),
         "embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN),
         "embeddings.token_type_embeddings.weight": normal(2, HIDDEN),
         "embeddings.LayerNorm.weight": 1 + normal(HIDDEN, scale=0.1),
         "embeddings.LayerNorm.bias": normal(HIDDEN, scale=0.1)}
    for n in range(LAYERS):
        p = f"encoder.layer.{n}"
        for name, (out, inp) in {"attention.self.query": (HIDDEN, HIDDEN),
                                 "attention.self.key": (HIDDEN, HIDDEN),
                                 "attention.self.value": (HIDDEN, HIDDEN),
                                 "attention.output.dense": (HIDDEN, HIDDEN),
                                 "intermediate.dense": (INNER, HIDDEN),
                                 "output.dense": (HIDDEN, INNER)}.items():
            w[f"{p}.{name}.weight"] = normal(out, inp)
            w[f"{p}.{name}.bias"] = normal(out, scale=0.1)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}.{norm}.weight"] = 1 + normal(HIDDEN, scale=0.1)
            w[f"{p}.{norm}.bias"] = normal(HIDDEN, scale=0.1)
    return w


def write_safetensors(path: Path, tensors: dict[str, np.ndarray[Any, Any]]) -> None:
    """The safetensors format by hand: an 8-byte header length, a JSON header, the raw data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


def tokenizer() -> Any:
    """A BERT WordPiece tokenizer over VOCAB, as tokenizer.json files describe one."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    tok = Tokenizer(WordPiece({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


def write_model(folder: Path, seed: int = 7) -> Path:
    """model.safetensors, tokenizer.json and config.json of the tiny model, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", weights(seed))
    tokenizer().save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


def _layer_norm(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any],
                b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


_erf = np.vectorize(math.erf)


def reference(text: str, seed: int = 7) -> np.ndarray[Any, Any]:
    """The sentence vector by the book, in float64: BERT, mean pooling, L2 normalisation."""
    w = {k: v.astype(np.float64) for k, v in weights(seed).items()}
    ids = tokenizer().encode(text).ids
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][: len(ids)]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    size = HIDDEN // HEADS
    for n in range(LAYERS):
        p = f"encoder.layer.{n}"

        def dense(v: np.ndarray[Any, Any], name: str, p: str = p) -> np.ndarray[Any, Any]:
            return v @ w[f"{p}.{name}.weight"].T + w[f"{p}.{name}.bias"]

        q, k, v = (dense(x, f"attention.self.{m}").reshape(len(ids), HEADS, size)
                   .transpose(1, 0, 2) for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(len(ids), HIDDEN)
        x = _layer_norm(dense(context, "attention.output.dense") + x,
                        w[f"{p}.attention.output.LayerNorm.weight"],
                        w[f"{p}.attention.output.LayerNorm.bias"])
        inner = dense(x, "intermediate.dense")
        inner = 0.5 * inner * (1 + _erf(inner / math.sqrt(2)))
        x = _layer_norm(dense(inner, "output.dense") + x, w[f"{p}.output.LayerNorm.weight"],
                        w[f"{p}.output.LayerNorm.bias"])
    mean = x.mean(0)
    return mean / np.linalg.norm(mean)
