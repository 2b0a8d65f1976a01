#!/usr/bin/python3
"""Writes the malformed model files of testdata/bad/ (committed; rerun to
regenerate). Each one exercises one loader error of libbbir's model_io.c;
tests/unit/test_model_io.c loads every file and checks status and message."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(num, wire, payload):
    tag = varint((num << 3) | wire)
    if wire == 2:
        return tag + varint(len(payload)) + payload
    return tag + payload


IR_VERSION_10 = field(1, 0, varint(10))


def nested_graphs(depth):
    """ModelProto whose graph nests `depth` GraphProtos through If bodies."""
    g = field(2, 2, b"leaf")  # innermost graph: just a name
    for _ in range(depth - 1):
        attr = field(1, 2, b"then_branch") + field(20, 0, varint(5)) + field(6, 2, g)
        node = field(4, 2, b"If") + field(5, 2, attr)
        g = field(1, 2, node)
    return IR_VERSION_10 + field(7, 2, g)


FILES = {
    # 0 bytes: not a model at all
    "empty.onnx": b"",
    # plain text
    "not_protobuf.onnx": b"This is not an ONNX model.\n",
    # graph declares 50 bytes, the file ends 12 bytes into it
    "truncated.onnx": IR_VERSION_10 + varint((7 << 3) | 2) + varint(50)
    + field(2, 2, b"main") + field(1, 2, b"\x0a\x01x")[:6],
    # graph length prefix of 2^40 bytes
    "absurd_length.onnx": IR_VERSION_10 + varint((7 << 3) | 2) + varint(1 << 40) + b"xx",
    # ir_version sent as a length-delimited field
    "wrong_wire_type.onnx": field(2, 2, b"bbc") + field(1, 2, b"hi"),
    # 65 nested graphs, one more than BB_MODEL_MAX_GRAPH_DEPTH
    "deep_graphs.onnx": nested_graphs(65),
}

for name, data in FILES.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
