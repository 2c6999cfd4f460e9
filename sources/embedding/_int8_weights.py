"""Keep the embedding model's int8 weights int8 while it runs: onnxruntime's `MatMulNBits`.

The packaged MiniLM stores each projection as int8 with a float scale per output column, and
multiplies by `MatMul(x, Cast(w_int8) * scale)`. onnxruntime folds that constant into a float32
matrix when the session starts, so every query streams the projections' 10.6M weights as
42 MB of float32 (the word-embedding table stays a float32 lookup either way). Here each such
`MatMul` becomes one `MatMulNBits` (bits 8, the same int8 values and scales, shifted to uint8
about the operator's default zero point of 128) that reads the weights as 8-bit blocks and
computes in int8 (`accuracy_level` 4: each token's activations quantized per block of
`BLOCK_SIZE` along the inner dimension).

Measured on 2 cores (x86-64, AVX-512 VNNI; `python -m benchmarks.embedder_compute`): one query
p50 3.52 against 5.45 ms through float32; over the dev conversations the vectors keep cosine
>= 0.997 with the float32 path's and top-10 neighbours agree 0.97; a hybrid turn at 100k
memories costs about 1.2 ms less, and the judged relevance figures moved by less than a
question's worth (CHANGELOG, session 12). With `accuracy_level` 0 the rewritten graph gives the
float32 path's outputs to 1e-5 (tested): the mapping is exact, the only approximation is the
activations' quantization.
"""

from __future__ import annotations

from typing import Any, Final

import attrs
import numpy as np
import numpy.typing as npt
from google.protobuf.message import Message

from ._onnx_proto import AttributeProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto

BLOCK_SIZE: Final = 64
"""Inner-dimension block of a weight scale and of an activation's quantization. Dev top-10
agreement with float32: 0.985 at 16, 0.978 at 32, 0.972 at 64, 0.964 at 128; query time
5.96 / 5.77 / 5.09 / 4.85 ms against 7.04 float32 (one run, alternated)."""
INT8_COMPUTE: Final = 4  # MatMulNBits accuracy_level: int8 products of quantized activations
_MIN_BLOCK: Final = 16
_MAX_LEVEL: Final = 4
_MS_DOMAIN: Final = "com.microsoft"


def pack(weights: npt.NDArray[np.int8], block_size: int = BLOCK_SIZE) -> npt.NDArray[np.uint8]:
    """`MatMulNBits`'s B of an int8 (K, N) matrix: (N, K / block_size, block_size) uint8, +128."""
    k, n = weights.shape
    if k % block_size:
        msg = f"inner dimension {k} is not a multiple of the block size {block_size}"
        raise ValueError(msg)
    shifted = weights.T.astype(np.int16) + 128
    return shifted.astype(np.uint8).reshape(n, k // block_size, block_size)


def block_scales(
    scale: npt.NDArray[np.float32], k: int, block_size: int = BLOCK_SIZE
) -> npt.NDArray[np.float32]:
    """`MatMulNBits`'s scales of per-column scales (1, N): each column's scale for each block."""
    n = scale.shape[-1]
    return np.repeat(scale.reshape(n, 1), k // block_size, axis=1).reshape(-1).astype(np.float32)


def rewrite(model: Message, *, accuracy_level: int = INT8_COMPUTE, block_size: int = BLOCK_SIZE) -> int:
    """Replace in place every `MatMul(x, Cast(w_int8) * scale(1, N))`; return how many.

    A `MatMul` of any other form, or whose inner dimension the block size does not divide, is
    left as it is; casts and products no longer used, and the initializers only they used, are
    removed. Weights shared by several projections are packed once. ValueError for a block size
    that is not a power of two from 16, or an accuracy level outside 0-4.
    """
    if block_size < _MIN_BLOCK or block_size & (block_size - 1) or not 0 <= accuracy_level <= _MAX_LEVEL:
        msg = f"need a power-of-two block_size >= 16 and accuracy_level 0-4: {block_size}, {accuracy_level}"
        raise ValueError(msg)
    graph = model.graph
    made = {o: node for node in graph.node for o in node.output}
    inits = {init.name: init for init in graph.initializer}
    replaced: dict[int, Message] = {}
    packed: dict[tuple[str, str], list[Message]] = {}
    touched: set[str] = set()  # outputs of the casts and products, names of the int8 tensors
    for node in graph.node:
        found = _int8_weight(node, made, inits)
        if found is None or found.rows % block_size:
            continue
        key = (found.weights.name, found.scale.name)
        if key not in packed:
            packed[key] = _packed(found, block_size)
        replaced[id(node)] = _nbits(node, found, packed[key], accuracy_level, block_size)
        touched.update((found.mul.output[0], found.cast.output[0], *key))
    if replaced:
        nodes = [replaced.get(id(node), node) for node in graph.node]
        del graph.node[:]
        graph.node.extend(nodes)
        graph.initializer.extend(t for tensors in packed.values() for t in tensors)
        _prune(graph, touched)
        if not any(op.domain == _MS_DOMAIN for op in model.opset_import):
            model.opset_import.append(OperatorSetIdProto(domain=_MS_DOMAIN, version=1))
    return len(replaced)


@attrs.frozen
class _Found:
    """A projection on int8 weights: its product, its cast and the two initializers."""

    mul: Message
    cast: Message
    weights: Message
    scale: Message

    @property
    def rows(self) -> int:
        """The weights' inner dimension (K)."""
        return int(self.weights.dims[0])


def _packed(found: _Found, block_size: int) -> list[Message]:
    """The packed weights and block scales of a projection, as two new initializers."""
    weights = _to_array(found.weights, np.int8)
    scale = _to_array(found.scale, np.float32)
    return [
        _from_array(pack(weights, block_size), f"{found.weights.name}_nbits", TensorProto.UINT8),
        _from_array(
            block_scales(scale, weights.shape[0], block_size), f"{found.scale.name}_nbits", TensorProto.FLOAT
        ),
    ]


def _to_array(tensor: Message, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """An INT8 or FLOAT initializer's values (raw or typed fields), in its shape."""
    dims = tuple(int(d) for d in tensor.dims)
    if tensor.raw_data:
        values = np.frombuffer(tensor.raw_data, dtype=np.dtype(dtype).newbyteorder("<"))
    elif dtype is np.float32:
        values = np.asarray(tensor.float_data, dtype=np.float32)
    else:
        values = np.asarray(tensor.int32_data, dtype=np.int32)
    return values.astype(dtype).reshape(dims)


def _from_array(values: npt.NDArray[Any], name: str, data_type: int) -> Message:
    """An initializer of `values` (little-endian raw data), as onnx's numpy_helper.from_array makes it."""
    return TensorProto(
        dims=values.shape,
        data_type=data_type,
        name=name,
        raw_data=values.astype(values.dtype.newbyteorder("<")).tobytes(),
    )


def _nbits(
    node: Message, found: _Found, tensors: list[Message], accuracy_level: int, block_size: int
) -> Message:
    """The `MatMulNBits` standing for `node`, on the packed initializers `tensors`."""
    k, n = (int(d) for d in found.weights.dims)
    ints = {"K": k, "N": n, "accuracy_level": accuracy_level, "bits": 8, "block_size": block_size}
    return NodeProto(
        op_type="MatMulNBits",
        input=[node.input[0], *(t.name for t in tensors)],
        output=list(node.output),
        name=f"{node.name or node.output[0]}_nbits",
        domain=_MS_DOMAIN,
        attribute=[AttributeProto(name=key, i=ints[key], type=AttributeProto.INT) for key in sorted(ints)],
    )


def _prune(graph: Message, touched: set[str]) -> None:
    """Drop the rewritten projections' casts and products (`touched` outputs) that nothing uses
    any more, nor a graph output, then their int8 initializers (`touched` names) likewise."""
    while True:
        used = _used(graph)
        kept = [node for node in graph.node if node.output[0] not in touched or set(node.output) & used]
        if len(kept) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(kept)
    inits = [init for init in graph.initializer if init.name in used or init.name not in touched]
    del graph.initializer[:]
    graph.initializer.extend(inits)


def _used(graph: Message) -> set[str]:
    """The names the graph's nodes read or it outputs."""
    return {name for node in graph.node for name in node.input} | {out.name for out in graph.output}


def _int8_weight(node: Message, made: dict[str, Message], inits: dict[str, Message]) -> _Found | None:
    """The projection when `node` is `MatMul(x, Cast(w_int8 (K, N)) * scale (1, N))`, else None."""
    if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx"):
        return None
    mul = made.get(node.input[1])
    if mul is None or mul.op_type != "Mul":
        return None
    cast, scale = made.get(mul.input[0]), inits.get(mul.input[1])
    if cast is None or cast.op_type != "Cast" or scale is None or cast.input[0] not in inits:
        return None
    to = next((a.i for a in cast.attribute if a.name == "to"), None)
    if to != TensorProto.FLOAT or scale.data_type != TensorProto.FLOAT:
        return None
    weights = inits[cast.input[0]]
    is_int8 = weights.data_type == TensorProto.INT8 and len(weights.dims) == 2
    if not is_int8 or tuple(scale.dims) != (1, weights.dims[1]):
        return None
    return _Found(mul, cast, weights, scale)


def rewrite_serialized(
    raw: bytes, *, accuracy_level: int = INT8_COMPUTE, block_size: int = BLOCK_SIZE
) -> bytes:
    """`rewrite` of a serialized model, serialized again (what an onnxruntime session loads)."""
    model = ModelProto.FromString(raw)
    rewrite(model, accuracy_level=accuracy_level, block_size=block_size)
    serialised: bytes = model.SerializeToString()
    return serialised


__all__ = [
    "BLOCK_SIZE",
    "INT8_COMPUTE",
    "ModelProto",
    "block_scales",
    "pack",
    "rewrite",
    "rewrite_serialized",
]
