#!/usr/bin/python3
"""onnx_schema_compare.py — helper of onnx_schema.sh (run with /usr/bin/python3).

Modes (each prints one line and exits 0 on success, 1 on a mismatch or
error, 2 when something it needs is missing):

  json  --pb2-dir D --bbc BBC FILE
      Parse FILE with onnx_ml_pb2 generated into D by
      `protoc --python_out=D -I proto proto/onnx-ml.proto`, convert it with
      json_format.MessageToDict(m, preserving_proto_field_name=True) and
      compare it field for field with the output of `BBC dump --json FILE`.
  count --pb2-dir D FILE
      Print the number of model-local functions our schema sees.
  onnx  --pb2-dir D FILE
      Load FILE with Debian's python3-onnx (official schema 1.12) and check
      that it sees the same model-local functions as our schema (run in a
      child process: both modules register package `onnx` in protobuf's
      default descriptor pool, so they cannot share one process).
"""
import argparse
import json
import math
import os
import subprocess
import sys


def load_ours(pb2_dir, path):
    sys.path.insert(0, pb2_dir)
    import onnx_ml_pb2  # generated at test time

    m = onnx_ml_pb2.ModelProto()
    with open(path, "rb") as f:
        m.ParseFromString(f.read())
    return m


def same_number(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    # float fields go through float32 on one side: compare at that precision
    return a == b or math.isclose(a, b, rel_tol=2e-7, abs_tol=1e-45)


def diff(want, got, path, out):
    """Append "path: ..." lines for every difference (want = python side)."""
    if len(out) >= 20:
        return
    if isinstance(want, dict) and isinstance(got, dict):
        for k in want:
            if k not in got:
                out.append("%s.%s: missing in bbc output (python: %s)"
                           % (path, k, json.dumps(want[k])[:80]))
        for k in got:
            if k not in want:
                out.append("%s.%s: not in the file (bbc: %s)" % (path, k, json.dumps(got[k])[:80]))
        for k in want:
            if k in got:
                diff(want[k], got[k], "%s.%s" % (path, k), out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append("%s: %d elements in python, %d in bbc" % (path, len(want), len(got)))
            return
        for i, (w, g) in enumerate(zip(want, got)):
            diff(w, g, "%s[%d]" % (path, i), out)
    elif isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if not same_number(want, got):
            out.append("%s: python %r, bbc %r" % (path, want, got))
    elif type(want) is not type(got) or want != got:
        out.append("%s: python %s, bbc %s" % (path, json.dumps(want)[:80], json.dumps(got)[:80]))


def mode_json(args):
    if not os.access(args.bbc, os.X_OK):
        print("FAIL: bbc not built (%s missing): cannot compare `bbc dump --json`" % args.bbc)
        return 2
    from google.protobuf import json_format

    want = json_format.MessageToDict(load_ours(args.pb2_dir, args.file),
                                     preserving_proto_field_name=True)
    p = subprocess.run([args.bbc, "dump", "--json", args.file], capture_output=True)
    if p.returncode != 0:
        print("FAIL: bbc dump --json exited %d: %s"
              % (p.returncode, p.stderr.decode(errors="replace").strip()[:300]))
        return 1
    try:
        got = json.loads(p.stdout)
    except ValueError as e:
        print("FAIL: bbc dump --json printed invalid JSON: %s" % e)
        return 1
    out = []
    diff(want, got, "ModelProto", out)
    if out:
        print("FAIL: %s differs from python's MessageToDict:" % args.file)
        for line in out:
            print("  " + line)
        return 1
    print("ok: bbc dump --json matches MessageToDict (%d top-level fields)" % len(want))
    return 0


def mode_count(args):
    m = load_ours(args.pb2_dir, args.file)
    print(json.dumps({"functions": [[f.domain, f.name] for f in m.functions],
                      "ir_version": m.ir_version, "nodes": len(m.graph.node)}))
    return 0


def mode_onnx(args):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "count", "--pb2-dir",
                        args.pb2_dir, args.file], capture_output=True)
    if p.returncode != 0:
        print("FAIL: our schema cannot parse %s: %s" % (args.file, p.stderr.decode()[-300:]))
        return 1
    ours = json.loads(p.stdout)
    try:
        import onnx
    except ImportError:
        print("FAIL: python3-onnx is not installed")
        return 2
    try:
        # external data (if any) is not next to test files: do not follow it
        model = onnx.load(args.file, load_external_data=False)
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        print("FAIL: onnx.load(%s): %s: %s" % (args.file, type(e).__name__, e))
        return 1
    theirs = {"functions": [[f.domain, f.name] for f in model.functions],
              "ir_version": model.ir_version, "nodes": len(model.graph.node)}
    if theirs != ours:
        print("FAIL: onnx %s sees %s, our schema sees %s" % (onnx.__version__, theirs, ours))
        return 1
    print("ok: onnx %s loads it with %d model-local functions"
          % (onnx.__version__, len(model.functions)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["json", "count", "onnx"])
    ap.add_argument("--pb2-dir", required=True)
    ap.add_argument("--bbc", default="build/bin/bbc")
    ap.add_argument("file")
    args = ap.parse_args()
    return {"json": mode_json, "count": mode_count, "onnx": mode_onnx}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
