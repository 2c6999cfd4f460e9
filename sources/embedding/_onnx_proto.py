"""The few ONNX protobuf messages and fields the int8 rewrite reads and writes, without the onnx
package: declared here by their numbers in the ONNX format (`onnx.proto`, proto2), in a
descriptor pool of our own, read and written by the protobuf that onnxruntime requires anyway.

Only the fields `sources.embedding._int8_weights` touches are declared. Every other field of a model
(shapes, metadata, the other node and tensor fields) is an unknown field to these messages,
which protobuf keeps as read and writes back, so a parsed and re-serialized model loses nothing.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# message -> (field, number, type, label, message or enum type); numbers as in onnx.proto.
_FIELDS: Final[dict[str, tuple[tuple[str, int, int, int, str], ...]]] = {
    "ModelProto": (
        ("graph", 7, _F.TYPE_MESSAGE, _OPTIONAL, ".onnx.GraphProto"),
        ("opset_import", 8, _F.TYPE_MESSAGE, _REPEATED, ".onnx.OperatorSetIdProto"),
    ),
    "GraphProto": (
        ("node", 1, _F.TYPE_MESSAGE, _REPEATED, ".onnx.NodeProto"),
        ("initializer", 5, _F.TYPE_MESSAGE, _REPEATED, ".onnx.TensorProto"),
        ("output", 12, _F.TYPE_MESSAGE, _REPEATED, ".onnx.ValueInfoProto"),
    ),
    "NodeProto": (
        ("input", 1, _F.TYPE_STRING, _REPEATED, ""),
        ("output", 2, _F.TYPE_STRING, _REPEATED, ""),
        ("name", 3, _F.TYPE_STRING, _OPTIONAL, ""),
        ("op_type", 4, _F.TYPE_STRING, _OPTIONAL, ""),
        ("attribute", 5, _F.TYPE_MESSAGE, _REPEATED, ".onnx.AttributeProto"),
        ("domain", 7, _F.TYPE_STRING, _OPTIONAL, ""),
    ),
    "AttributeProto": (
        ("name", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("i", 3, _F.TYPE_INT64, _OPTIONAL, ""),
        ("type", 20, _F.TYPE_ENUM, _OPTIONAL, ".onnx.AttributeProto.AttributeType"),
    ),
    "TensorProto": (
        ("dims", 1, _F.TYPE_INT64, _REPEATED, ""),
        ("data_type", 2, _F.TYPE_INT32, _OPTIONAL, ""),
        ("float_data", 4, _F.TYPE_FLOAT, _REPEATED, ""),
        ("int32_data", 5, _F.TYPE_INT32, _REPEATED, ""),
        ("name", 8, _F.TYPE_STRING, _OPTIONAL, ""),
        ("raw_data", 9, _F.TYPE_BYTES, _OPTIONAL, ""),
    ),
    "OperatorSetIdProto": (
        ("domain", 1, _F.TYPE_STRING, _OPTIONAL, ""),
        ("version", 2, _F.TYPE_INT64, _OPTIONAL, ""),
    ),
    "ValueInfoProto": (("name", 1, _F.TYPE_STRING, _OPTIONAL, ""),),
}
_ENUMS: Final = {
    "AttributeProto": ("AttributeType", (("UNDEFINED", 0), ("FLOAT", 1), ("INT", 2))),
    "TensorProto": ("DataType", (("UNDEFINED", 0), ("FLOAT", 1), ("UINT8", 2), ("INT8", 3))),
}
_PACKED: Final = frozenset({("TensorProto", "float_data"), ("TensorProto", "int32_data")})


def _file() -> descriptor_pb2.FileDescriptorProto:
    """The declared subset of onnx.proto as a file descriptor."""
    proto = descriptor_pb2.FileDescriptorProto(name="context_broker_onnx_subset.proto", package="onnx")
    for message, fields in _FIELDS.items():
        m = proto.message_type.add(name=message)
        for name, number, kind, label, type_name in fields:
            field = m.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
            if (message, name) in _PACKED:
                field.options.packed = True
        if message in _ENUMS:
            enum_name, values = _ENUMS[message]
            enum = m.enum_type.add(name=enum_name)
            for value_name, value in values:
                enum.value.add(name=value_name, number=value)
    return proto


_POOL: Final = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _message(name: str) -> Any:  # noqa: ANN401 - message classes made at run time have no static type
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"onnx.{name}"))


ModelProto: Final = _message("ModelProto")
NodeProto: Final = _message("NodeProto")
TensorProto: Final = _message("TensorProto")
AttributeProto: Final = _message("AttributeProto")
OperatorSetIdProto: Final = _message("OperatorSetIdProto")
