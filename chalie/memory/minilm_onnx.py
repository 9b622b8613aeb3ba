"""A BERT sentence encoder's weights (safetensors) to an ONNX graph ONNX Runtime runs, once.

`convert` reads `model.safetensors` and `config.json` (a Hugging Face BERT checkpoint such as
sentence-transformers/all-MiniLM-L6-v2) and writes one .onnx file: the encoder exactly as
`transformers`' BertModel computes it (absolute positions, token type 0, LayerNormalization of
opset 17, GELU in its erf form), then the mean of the token vectors under the attention mask,
L2-normalised, as sentence-transformers' Pooling and Normalize modules do. Inputs `input_ids`
and `attention_mask` (int64, batch x tokens); output `embedding` (float32, batch x hidden).

The safetensors file is read here with numpy (its format is a JSON header and raw arrays), so
neither torch nor the `safetensors` package is needed. In float32 (the vocabulary's table in
float16) the vectors equal sentence-transformers' (cosine 0.99999 or more). With `int8`, every
matrix is stored in 8-bit blocks of 32 inputs, each with its own scale (ONNX Runtime's
MatMulNBits, computing in int8): a third less memory and faster, vectors within cosine 0.998 of
float32's. (onnxruntime.quantization's dynamic int8, one scale per matrix for the activations,
was measured too: vectors only within 0.975-0.99.)
The file is written to a temporary name beside the target and renamed: a crash mid-way leaves
no half-written model behind.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17  # LayerNormalization is an operator from opset 17 on
MASK_BIAS = -10000.0  # added to the attention scores of padding: exp() of it is 0 in float32
BLOCK = 32  # int8: inputs sharing one scale (128: 15% faster, vectors within cosine 0.995)
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """Every tensor of a .safetensors file as a float32 (or integer) numpy array."""
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header: dict[str, Any] = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[start:end]
        if info["dtype"] == "BF16":  # the upper half of a float32
            array = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in _DTYPES:
            array = raw.view(np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, not supported")
        array = array.reshape(info["shape"])
        out[name] = array.astype(np.float32) if array.dtype.kind == "f" else np.array(array)
    return out


class _Graph:
    """The nodes and initializers of the graph being built, with fresh names for outputs."""

    def __init__(self, weights: dict[str, np.ndarray[Any, Any]], *, int8: bool) -> None:
        from onnx import helper, numpy_helper  # noqa: PLC0415  (onnx: only to build the file)

        self._helper, self._numpy_helper = helper, numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._weights = weights
        self._int8 = int8
        self._count = 0

    def weight(self, name: str) -> np.ndarray[Any, Any]:
        for key in (name, f"bert.{name}"):
            if key in self._weights:
                return self._weights[key]
        raise KeyError(f"the checkpoint has no tensor {name!r}")

    def const(self, name: str, value: np.ndarray[Any, Any]) -> str:
        self.initializers.append(self._numpy_helper.from_array(value, name))
        return name

    def op(self, kind: str, *inputs: str, domain: str = "", **attrs: Any) -> str:
        self._count += 1
        out = f"{kind.lower()}_{self._count}"
        self.nodes.append(self._helper.make_node(kind, list(inputs), [out], domain=domain,
                                                 **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        """x @ W.T + b: W stored transposed ([in, out]) for MatMul, or as int8 blocks."""
        w = self.weight(f"{prefix}.weight")
        b = self.const(f"{prefix}.bias", self.weight(f"{prefix}.bias"))
        if not self._int8:
            return self.op("Add", self.op("MatMul", x, self.const(
                f"{prefix}.weight", np.ascontiguousarray(w.T))), b)
        codes, scales = quantize_blocks(w)
        return self.op("Add", self.op(
            "MatMulNBits", x, self.const(f"{prefix}.weight_q", codes),
            self.const(f"{prefix}.weight_scales", scales), domain="com.microsoft",
            K=w.shape[1], N=w.shape[0], bits=8, block_size=BLOCK, accuracy_level=4), b)

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        scale = self.const(f"{prefix}.weight", self.weight(f"{prefix}.weight"))
        bias = self.const(f"{prefix}.bias", self.weight(f"{prefix}.bias"))
        return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)


def quantize_blocks(w: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any],
                                                    np.ndarray[Any, Any]]:
    """A [out, in] matrix as ONNX Runtime's MatMulNBits (8 bits) takes it: each row cut into
    blocks of BLOCK inputs, each block one float scale and BLOCK unsigned bytes around 128."""
    rows, inputs = w.shape
    count = -(-inputs // BLOCK)
    blocks = np.pad(w, ((0, 0), (0, count * BLOCK - inputs))).reshape(rows, count, BLOCK)
    scales = np.abs(blocks).max(axis=-1) / 127.0
    scales[scales == 0.0] = 1.0
    codes = np.clip(np.round(blocks / scales[..., None]) + 128, 0, 255).astype(np.uint8)
    return codes, scales.astype(np.float32).reshape(-1)


def _attention(g: _Graph, x: str, prefix: str, *, mask_bias: str, heads: int, hidden: int) -> str:
    size = hidden // heads
    split = g.const(f"{prefix}.split_shape", np.array([0, 0, heads, size], dtype=np.int64))
    merge = g.const(f"{prefix}.merge_shape", np.array([0, 0, hidden], dtype=np.int64))

    def project(name: str, perm: list[int]) -> str:
        y = g.linear(x, f"{prefix}.self.{name}")
        return g.op("Transpose", g.op("Reshape", y, split), perm=perm)

    q = project("query", [0, 2, 1, 3])  # batch, head, token, size
    k = project("key", [0, 2, 3, 1])  # batch, head, size, token
    v = project("value", [0, 2, 1, 3])
    scale = g.const(f"{prefix}.scale", np.array(1.0 / math.sqrt(size), dtype=np.float32))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask_bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge)
    return g.op("Add", g.linear(merged, f"{prefix}.output.dense"), x)


def _gelu(g: _Graph, x: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt(2))): BERT's exact GELU (ONNX Runtime fuses it into one op)."""
    root2 = g.const(f"sqrt2_{len(g.nodes)}", np.array(math.sqrt(2.0), dtype=np.float32))
    one = g.const(f"one_{len(g.nodes)}", np.array(1.0, dtype=np.float32))
    half = g.const(f"half_{len(g.nodes)}", np.array(0.5, dtype=np.float32))
    erf = g.op("Erf", g.op("Div", x, root2))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, one)), half)


def _word_vectors(g: _Graph, table: np.ndarray[Any, Any], *, int8: bool) -> str:
    """The tokens' vectors (float32, batch x tokens x hidden), gathered from the vocabulary's
    table: half the weights. In float16 (a relative error of 1/2048 in each component, vectors
    within cosine 0.99999 of float32's) it costs 22 MiB less; with int8, each row in signed
    bytes with its own scale (1/254 of the row's largest component) 11 MiB less again."""
    from onnx import TensorProto  # noqa: PLC0415  (onnx: only to build the file)

    if not int8:
        half = g.const("word_embeddings", table.astype(np.float16))
        return g.op("Cast", g.op("Gather", half, "input_ids", axis=0), to=TensorProto.FLOAT)
    scales = np.abs(table).max(axis=1, keepdims=True) / 127.0
    scales[scales == 0.0] = 1.0
    codes = np.clip(np.round(table / scales), -127, 127).astype(np.int8)
    rows = g.op("Gather", g.const("word_codes", codes), "input_ids", axis=0)
    row_scales = g.op("Gather", g.const("word_scales", scales.astype(np.float32)), "input_ids",
                      axis=0)
    return g.op("Mul", g.op("Cast", rows, to=TensorProto.FLOAT), row_scales)


def build_model(weights: dict[str, np.ndarray[Any, Any]], config: dict[str, Any], *,
                int8: bool = False) -> Any:
    """The onnx ModelProto of a BERT encoder with mean pooling and L2 normalisation; with int8,
    its matrices as 8-bit blocks."""
    from onnx import TensorProto, helper  # noqa: PLC0415  (onnx: only to build the file)

    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    if config.get("hidden_act", "gelu") != "gelu" or hidden % heads:
        raise ValueError("not a BERT encoder this converter knows (hidden_act gelu, "
                         "hidden_size a multiple of num_attention_heads)")
    g = _Graph(weights, int8=int8)
    words = _word_vectors(g, g.weight("embeddings.word_embeddings.weight"), int8=int8)
    # Every token has type 0: its embedding is folded into the positions' table.
    table = (g.weight("embeddings.position_embeddings.weight")
             + g.weight("embeddings.token_type_embeddings.weight")[0])
    positions = g.const("position_embeddings", table.astype(np.float32))
    zero, one = (g.const(n, np.array(v, dtype=np.int64)) for n, v in (("i0", 0), ("i1", 1)))
    tokens = g.op("Gather", g.op("Shape", "input_ids"), one, axis=0)
    position_ids = g.op("Range", zero, tokens, one)
    x = g.op("Add", words, g.op("Gather", positions, position_ids, axis=0))
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)

    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)  # batch, token
    ones = g.const("f1", np.array(1.0, dtype=np.float32))
    bias_scale = g.const("mask_bias", np.array(MASK_BIAS, dtype=np.float32))
    axes12 = g.const("axes12", np.array([1, 2], dtype=np.int64))
    mask_bias = g.op("Unsqueeze", g.op("Mul", g.op("Sub", ones, mask), bias_scale), axes12)

    for n in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{n}"
        x = g.layer_norm(_attention(g, x, f"{p}.attention", mask_bias=mask_bias, heads=heads,
                                   hidden=hidden),
                         f"{p}.attention.output.LayerNorm", eps)
        inner = _gelu(g, g.linear(x, f"{p}.intermediate.dense"))
        x = g.layer_norm(g.op("Add", g.linear(inner, f"{p}.output.dense"), x),
                         f"{p}.output.LayerNorm", eps)

    axis1, axis2 = (g.const(n, np.array([v], dtype=np.int64)) for n, v in (("ax1", 1), ("ax2", 2)))
    weights3 = g.op("Unsqueeze", mask, axis2)  # batch, token, 1
    summed = g.op("ReduceSum", g.op("Mul", x, weights3), axis1, keepdims=0)
    counts = g.op("Max", g.op("ReduceSum", weights3, axis1, keepdims=0),
                  g.const("tiny", np.array(1e-9, dtype=np.float32)))
    mean = g.op("Div", summed, counts)
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[-1], keepdims=1),  # opset 17: an attribute
                g.const("eps", np.array(1e-12, dtype=np.float32)))
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))

    ids = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
           for name in ("input_ids", "attention_mask")]
    out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(g.nodes, "sentence_encoder", ids, [out], g.initializers)
    opsets = [helper.make_opsetid("", OPSET)]
    if int8:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="chalie")
    model.ir_version = 8  # readable by every ONNX Runtime from 1.10 on
    helper.set_model_props(model, {
        "max_tokens": str(int(config.get("max_position_embeddings", 512))),
        "dimension": str(hidden),
    })
    return model


def convert(source: Path, target: Path, *, int8: bool = False) -> None:
    """Write the ONNX model of the checkpoint in folder `source` to `target` (atomically)."""
    import onnx  # noqa: PLC0415  (only to build the file)

    config = json.loads((source / "config.json").read_text())
    model = build_model(read_safetensors(source / "model.safetensors"), config, int8=int8)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        onnx.save(model, tmp_name)
        os.replace(tmp_name, target)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    """`python -m chalie.memory.minilm_onnx SOURCE TARGET`: how the server converts, in a
    process of its own, so the conversion's few hundred MiB are handed back when it ends."""
    int8 = "--int8" in argv
    paths = [a for a in argv if a != "--int8"]
    if len(paths) != 2:
        print("usage: python -m chalie.memory.minilm_onnx SOURCE_FOLDER TARGET.onnx [--int8]",
              file=sys.stderr)
        return 2
    try:
        convert(Path(paths[0]), Path(paths[1]), int8=int8)
    except (OSError, ValueError, KeyError) as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
