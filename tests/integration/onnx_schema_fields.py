#!/usr/bin/python3
"""onnx_schema_fields.py — helper of onnx_schema_fields.sh (run with /usr/bin/python3).

Compares our .proto files with their references, field by field, through the
FileDescriptorSets protoc writes (descriptor_pb2 only: nothing is registered
in protobuf's default pool, so two schemas of package `onnx` can be compared
in one process).

  onnx  OURS.pb OFFICIAL.pb
      OURS.pb from proto/onnx-ml.proto, OFFICIAL.pb from Debian's
      python3-onnx (the official ONNX 1.12 schema). Every message, field
      (number, name, type, label, message type, packed, oneof) and enum
      value of the official schema must be in ours unchanged; everything
      ours has beyond it must be one of the later official additions listed
      in LATER_ONNX below (IR versions 9 to 12), with that exact shape.
  envelope  OURS.pb
      OURS.pb from proto/bb_envelope.proto: WireEnvelope, SlotFill,
      WireCorrelation and CorrelationKind exactly as IR_AND_DSL.md Part 8,
      plus the fields 4-7 Part 8 leaves open, the chunk streams (field 9,
      StreamChunk, ChunkKind), plus the transport handshake framing
      (Handshake, Frame).

Prints one "ok ..." / "FAIL ..." line per check and ends with
"N passed, N failed"; exits 1 on any failure.
"""
import sys

from google.protobuf import descriptor_pb2 as dpb

F = dpb.FieldDescriptorProto
OPT, REP = F.LABEL_OPTIONAL, F.LABEL_REPEATED
T_STR, T_BYTES, T_MSG, T_ENUM = F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE, F.TYPE_ENUM
T_I32, T_I64, T_U64, T_BOOL = F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL
T_F64 = F.TYPE_FIXED64

# Official ONNX fields, messages and enum values added after ONNX 1.12
# (onnx/onnx.proto, IR versions 9-12). Field numbers are wire format.
# (message, field number): (name, type, label, message type or "", oneof or None)
KV = ".onnx.StringStringEntryProto"
LATER_ONNX_FIELDS = {
    # IR 9: function attributes with defaults
    ("FunctionProto", 11): ("attribute_proto", T_MSG, REP, ".onnx.AttributeProto", None),
    # IR 10: overloads, function value_info, metadata_props everywhere
    ("FunctionProto", 12): ("value_info", T_MSG, REP, ".onnx.ValueInfoProto", None),
    ("FunctionProto", 13): ("overload", T_STR, OPT, "", None),
    ("FunctionProto", 14): ("metadata_props", T_MSG, REP, KV, None),
    ("NodeProto", 8): ("overload", T_STR, OPT, "", None),
    ("NodeProto", 9): ("metadata_props", T_MSG, REP, KV, None),
    ("ValueInfoProto", 4): ("metadata_props", T_MSG, REP, KV, None),
    ("GraphProto", 16): ("metadata_props", T_MSG, REP, KV, None),
    ("TensorProto", 16): ("metadata_props", T_MSG, REP, KV, None),
    # IR 11: multi-device configuration
    ("NodeProto", 10): ("device_configurations", T_MSG, REP,
                        ".onnx.NodeDeviceConfigurationProto", None),
    ("ModelProto", 26): ("configuration", T_MSG, REP, ".onnx.DeviceConfigurationProto", None),
    ("IntIntListEntryProto", 1): ("key", T_I64, OPT, "", None),
    ("IntIntListEntryProto", 2): ("value", T_I64, REP, "", None),
    ("NodeDeviceConfigurationProto", 1): ("configuration_id", T_STR, OPT, "", None),
    ("NodeDeviceConfigurationProto", 2): ("sharding_spec", T_MSG, REP,
                                          ".onnx.ShardingSpecProto", None),
    ("NodeDeviceConfigurationProto", 3): ("pipeline_stage", T_I32, OPT, "", None),
    ("ShardingSpecProto", 1): ("tensor_name", T_STR, OPT, "", None),
    ("ShardingSpecProto", 2): ("device", T_I64, REP, "", None),
    ("ShardingSpecProto", 3): ("index_to_device_group_map", T_MSG, REP,
                               ".onnx.IntIntListEntryProto", None),
    ("ShardingSpecProto", 4): ("sharded_dim", T_MSG, REP, ".onnx.ShardedDimProto", None),
    ("ShardedDimProto", 1): ("axis", T_I64, OPT, "", None),
    ("ShardedDimProto", 2): ("simple_sharding", T_MSG, REP, ".onnx.SimpleShardedDimProto", None),
    ("SimpleShardedDimProto", 1): ("dim_value", T_I64, OPT, "", "dim"),
    ("SimpleShardedDimProto", 2): ("dim_param", T_STR, OPT, "", "dim"),
    ("SimpleShardedDimProto", 3): ("num_shards", T_I64, OPT, "", None),
    ("DeviceConfigurationProto", 1): ("name", T_STR, OPT, "", None),
    ("DeviceConfigurationProto", 2): ("num_devices", T_I32, OPT, "", None),
    ("DeviceConfigurationProto", 3): ("device", T_STR, REP, "", None),
}
LATER_ONNX_ENUM_VALUES = {
    ("TensorProto.DataType", "FLOAT8E4M3FN"): 17,
    ("TensorProto.DataType", "FLOAT8E4M3FNUZ"): 18,
    ("TensorProto.DataType", "FLOAT8E5M2"): 19,
    ("TensorProto.DataType", "FLOAT8E5M2FNUZ"): 20,
    ("TensorProto.DataType", "UINT4"): 21,
    ("TensorProto.DataType", "INT4"): 22,
    ("TensorProto.DataType", "FLOAT4E2M1"): 23,
    ("TensorProto.DataType", "FLOAT8E8M0"): 24,
    ("TensorProto.DataType", "UINT2"): 25,
    ("TensorProto.DataType", "INT2"): 26,
    ("Version", "IR_VERSION_2021_7_30"): 8,
    ("Version", "IR_VERSION_2023_5_5"): 9,
    ("Version", "IR_VERSION_2024_3_25"): 10,
    ("Version", "IR_VERSION_2025_05_12"): 11,
}
# Enum values whose number moves with each release (the "current" IR version).
MOVING_ENUM_VALUES = {("Version", "IR_VERSION")}

# IR_AND_DSL.md Part 8, exactly; fields 4-7 are ours (deadline propagation
# and RTT piggyback), field 9 and StreamChunk too (an envelope larger than a
# frame in pieces), Handshake / Frame frame the stream transports.
ENVELOPE_FIELDS = {
    "WireCorrelation": {
        1: ("kind", T_ENUM, OPT, ".bb.core.CorrelationKind", None),
        2: ("wire_req_id", T_U64, OPT, "", None),
    },
    "WireEnvelope": {
        1: ("dest_peer_addresses", T_BYTES, REP, "", None),
        2: ("fills", T_MSG, REP, ".bb.core.SlotFill", None),
        3: ("correlation", T_MSG, OPT, ".bb.core.WireCorrelation", None),
        4: ("deadline_ns", T_F64, OPT, "", None),  # stamps: fixed64 (9 varint bytes at ~2^61)
        5: ("sent_at_ns", T_F64, OPT, "", None),
        6: ("echo_sent_at_ns", T_F64, OPT, "", None),
        7: ("echo_delay_ns", T_U64, OPT, "", None),
        8: ("src_peer_addresses", T_BYTES, REP, "", None),
        9: ("chunk", T_MSG, OPT, ".bb.core.StreamChunk", None),  # ours: chunk streams
    },
    "StreamChunk": {
        1: ("stream_id", T_U64, OPT, "", None),
        2: ("total", T_U64, OPT, "", None),
        3: ("offset", T_U64, OPT, "", None),
        4: ("data", T_BYTES, OPT, "", None),
        5: ("kind", T_ENUM, OPT, ".bb.core.ChunkKind", None),
        6: ("tail", T_BYTES, OPT, "", None),  # the first chunk's preview (chunk_fold.c)
    },
    "SlotFill": {
        1: ("dest_suffix", T_BYTES, OPT, "", None),
        2: ("payload", T_BYTES, OPT, "", None),
        3: ("trigger_only", T_BOOL, OPT, "", None),
    },
    "Handshake": {
        1: ("peer_id", T_BYTES, OPT, "", None),
        2: ("listen_addresses", T_BYTES, REP, "", None),
        3: ("targets", T_STR, REP, "", None),
        4: ("version", F.TYPE_UINT32, OPT, "", None),
    },
    "Admission": {  # a secure connection's first frame from the responder
        1: ("refused", T_STR, OPT, "", None),
    },
    "Frame": {
        1: ("handshake", T_MSG, OPT, ".bb.core.Handshake", "kind"),
        2: ("envelope", T_MSG, OPT, ".bb.core.WireEnvelope", "kind"),
        3: ("admission", T_MSG, OPT, ".bb.core.Admission", "kind"),
    },
}
ENVELOPE_ENUMS = {"CorrelationKind": {"NONE": 0, "REQUEST": 1, "RESPONSE": 2},
                  "ChunkKind": {"DATA": 0, "ACK": 1, "WAIT": 2, "REFUSE": 3}}

passed = 0
failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + (": " + detail if detail else ""))


def load(path):
    s = dpb.FileDescriptorSet()
    with open(path, "rb") as f:
        s.ParseFromString(f.read())
    if len(s.file) != 1:
        sys.exit("%s: expected one file, got %d" % (path, len(s.file)))
    return s.file[0]


def flatten(fd):
    """messages: name -> {number: shape}; enums: name -> {value name: number}.
    Nested names are dotted ("TensorProto.Segment")."""
    msgs, enums, packed = {}, {}, {}

    def walk(m, prefix):
        name = prefix + m.name
        fields = {}
        for f in m.field:
            oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
            # proto3 optional fields live in synthetic oneofs: not a real oneof
            if f.proto3_optional:
                oneof = None
            fields[f.number] = (f.name, f.type, f.label, f.type_name, oneof)
            packed[(name, f.number)] = f.options.packed
        msgs[name] = fields
        for e in m.enum_type:
            enums[name + "." + e.name] = {v.name: v.number for v in e.value}
        for n in m.nested_type:
            walk(n, name + ".")

    for m in fd.message_type:
        walk(m, "")
    for e in fd.enum_type:
        enums[e.name] = {v.name: v.number for v in e.value}
    return msgs, enums, packed


def shape_str(s):
    if s is None:
        return "absent"
    name, typ, label, tname, oneof = s
    return "%s %s %s%s%s" % ("repeated" if label == REP else "optional",
                             F.Type.Name(typ)[5:].lower(), name,
                             " <%s>" % tname if tname else "",
                             " (oneof %s)" % oneof if oneof else "")


def cmd_onnx(ours_path, official_path):
    ours, off = load(ours_path), load(official_path)
    check(ours.package == off.package == "onnx", "package onnx",
          "ours %r, official %r" % (ours.package, off.package))
    check(ours.syntax in ("", "proto2"), "syntax proto2", ours.syntax)
    om, oe, opk = flatten(ours)
    fm, fe, fpk = flatten(off)

    # every official message / field / enum value, unchanged
    for msg in sorted(fm):
        bad = []
        if msg not in om:
            check(False, "official message %s" % msg, "missing from ours")
            continue
        for num, shape in sorted(fm[msg].items()):
            if om[msg].get(num) != shape:
                bad.append("#%d: official %s, ours %s" % (num, shape_str(shape),
                                                         shape_str(om[msg].get(num))))
            elif opk[(msg, num)] != fpk[(msg, num)]:
                bad.append("#%d %s: packed differs" % (num, shape[0]))
        check(not bad, "official message %s: all %d fields" % (msg, len(fm[msg])),
              "; ".join(bad))
    for enum in sorted(fe):
        bad = ["%s=%d (ours %s)" % (k, v, oe.get(enum, {}).get(k))
               for k, v in sorted(fe[enum].items())
               if (enum, k) not in MOVING_ENUM_VALUES and oe.get(enum, {}).get(k) != v]
        check(not bad, "official enum %s: all %d values" % (enum, len(fe[enum])),
              ", ".join(bad))

    # everything beyond the official 1.12 schema is a later official addition
    later_msgs = {m for (m, _) in LATER_ONNX_FIELDS}
    for (msg, num), shape in sorted(LATER_ONNX_FIELDS.items()):
        got = om.get(msg, {}).get(num)
        check(got == shape, "later ONNX field %s.%s = %d" % (msg, shape[0], num),
              "ours %s" % shape_str(got))
    extra = []
    for msg, fields in sorted(om.items()):
        if msg not in fm and msg not in later_msgs:
            extra.append("message %s" % msg)
            continue
        for num, shape in sorted(fields.items()):
            if num not in fm.get(msg, {}) and (msg, num) not in LATER_ONNX_FIELDS:
                extra.append("%s #%d %s" % (msg, num, shape_str(shape)))
    for (enum, name), num in sorted(LATER_ONNX_ENUM_VALUES.items()):
        got = oe.get(enum, {}).get(name)
        check(got == num, "later ONNX enum value %s.%s = %d" % (enum, name, num),
              "ours %s" % got)
    for enum, values in sorted(oe.items()):
        for name, num in sorted(values.items()):
            if (name not in fe.get(enum, {}) and (enum, name) not in LATER_ONNX_ENUM_VALUES
                    and (enum, name) not in MOVING_ENUM_VALUES):
                extra.append("enum value %s.%s = %d" % (enum, name, num))
    check(not extra, "ours has nothing the official schema lacks", "; ".join(extra))
    # the current IR version is at least the one the worked example stamps
    cur = oe.get("Version", {}).get("IR_VERSION")
    check(cur is not None and cur >= 12, "Version.IR_VERSION >= 12", "ours %s" % cur)


def cmd_envelope(ours_path):
    fd = load(ours_path)
    check(fd.package == "bb.core", "package bb.core", fd.package)
    check(fd.syntax == "proto3", "syntax proto3", fd.syntax)
    msgs, enums, _ = flatten(fd)
    for msg, want in sorted(ENVELOPE_FIELDS.items()):
        got = msgs.get(msg)
        if got is None:
            check(False, "message %s" % msg, "missing")
            continue
        bad = ["#%d: want %s, ours %s" % (n, shape_str(want.get(n)), shape_str(got.get(n)))
               for n in sorted(set(want) | set(got)) if want.get(n) != got.get(n)]
        check(not bad, "message %s: exactly %d fields" % (msg, len(want)), "; ".join(bad))
    for enum, want in sorted(ENVELOPE_ENUMS.items()):
        check(enums.get(enum) == want, "enum %s = %s" % (enum, want), "ours %s" % enums.get(enum))
    extra = sorted(set(msgs) - set(ENVELOPE_FIELDS)) + sorted(set(enums) - set(ENVELOPE_ENUMS))
    check(not extra, "nothing else in bb_envelope.proto", ", ".join(extra))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "onnx":
        cmd_onnx(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "envelope":
        cmd_envelope(sys.argv[2])
    else:
        sys.exit(__doc__)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
