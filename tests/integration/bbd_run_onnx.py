#!/usr/bin/python3
"""bbd_run_onnx.py -- the independent side of tests/integration/bbd_run.sh.

Everything here uses Debian's python3-onnx and numpy only, never
BytesAndBrains code, so the expected values do not come from the backend
under test:

  input OUT.pb NAME ROWS COLS SEED    write a random float32 tensor
  reference MODEL.onnx OUT_DIR NAME=FILE.pb...
                                      evaluate MODEL with a small numpy
                                      interpreter, write OUT_DIR/<output>.pb
  reference-function MODEL.onnx OUT_DIR NAME=FILE.pb...
                                      the same for a recorded module's first function
  compare GOT.pb WANT.pb              allclose (rtol 1e-4, atol 1e-6)
  standard-mlp DIR                    a standard ONNX MLP (opset 13, made with
                                      onnx.helper, checked by onnx.checker) in
                                      the backend test-data layout, two data sets
  control-flow DIR                    If + Loop reading outer-scope values
  rename-output MODEL.onnx OUT.onnx NAME   the first graph output renamed
  drop-op-type MODEL.onnx OUT.onnx   the first node without op_type
  perturb FILE.pb                     add 1.0 to element 0 (a wrong expectation)
  onnx-node-cases OUT_DIR OPS_FILE    ONNX's own node test cases using only
                                      those ops and numeric tensors
  ops DIR...                          the op types (subgraphs too) the models
                                      under the directories use, one a line
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(path, arr, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())


def load(path):
    return numpy_helper.to_array(onnx.load_tensor(path))


# ---- a small numpy interpreter (only the ops the tests' models use) ----------

def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def run_graph(graph, env):
    env = dict(env)
    for t in graph.initializer:
        env.setdefault(t.name, numpy_helper.to_array(t))
    run_nodes(graph.node, env)
    return [env[o.name] for o in graph.output]


def run_nodes(nodes, env):
    for n in nodes:
        x = [env[i] if i else None for i in n.input]
        op = n.op_type
        if op == "Gemm":
            a, b = x[0], x[1]
            if attr(n, "transA", 0):
                a = a.T
            if attr(n, "transB", 0):
                b = b.T
            y = attr(n, "alpha", 1.0) * (a @ b)
            if len(x) > 2 and x[2] is not None:
                y = y + attr(n, "beta", 1.0) * x[2]
            out = [y]
        elif op == "MatMul":
            out = [x[0] @ x[1]]
        elif op == "Add":
            out = [x[0] + x[1]]
        elif op == "Mul":
            out = [x[0] * x[1]]
        elif op == "Identity":
            out = [x[0]]
        elif op == "Relu":
            out = [np.maximum(x[0], 0)]
        elif op == "Tanh":
            out = [np.tanh(x[0])]
        elif op == "Softmax":
            out = [softmax(x[0], attr(n, "axis", -1))]
        elif op == "Reshape":
            shape = [d if d != 0 else x[0].shape[i] for i, d in enumerate(x[1])]
            out = [x[0].reshape(shape)]
        elif op == "Constant":
            out = [numpy_helper.to_array(attr(n, "value"))]
        elif op == "ReduceSum":
            axes = tuple(int(a) for a in x[1]) if len(x) > 1 and x[1] is not None else None
            out = [x[0].sum(axis=axes, keepdims=bool(attr(n, "keepdims", 1)))]
        elif op == "Greater":
            out = [x[0] > x[1]]
        elif op == "If":
            branch = attr(n, "then_branch") if bool(x[0].reshape(-1)[0]) else attr(n, "else_branch")
            out = run_graph(branch, env)
        elif op == "Loop":
            body = attr(n, "body")
            trips = int(x[0].reshape(-1)[0])
            carried = list(x[2:])
            for i in range(trips):
                inner = dict(env)
                names = [v.name for v in body.input]
                inner[names[0]] = np.array(i, dtype=np.int64)
                inner[names[1]] = np.array(True)
                for k, v in enumerate(carried):
                    inner[names[2 + k]] = v
                res = run_graph(body, inner)
                carried = res[1:1 + len(carried)]
            out = carried
        else:
            raise SystemExit("reference: op %s is not in the test interpreter" % op)
        for name, val in zip(n.output, out):
            env[name] = np.asarray(val)


def cmd_reference(model, out_dir, *bindings):
    m = onnx.load(model)
    env = {}
    for b in bindings:
        name, path = b.split("=", 1)
        env[name] = load(path).astype(np.float64)
    os.makedirs(out_dir, exist_ok=True)
    for o, val in zip(m.graph.output, run_graph(m.graph, env)):
        save(os.path.join(out_dir, o.name + ".pb"), val.astype(np.float32), o.name)


def cmd_reference_function(model, out_dir, *bindings):
    """The same for a recorded BytesAndBrains module: its first function."""
    f = onnx.load(model).functions[0]
    env = {}
    for b in bindings:
        name, path = b.split("=", 1)
        env[name] = load(path).astype(np.float64)
    run_nodes(f.node, env)
    os.makedirs(out_dir, exist_ok=True)
    for o in f.output:
        save(os.path.join(out_dir, o + ".pb"), env[o].astype(np.float32), o)


def cmd_compare(got, want):
    g, w = load(got), load(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        raise SystemExit("compare: %s is %s%s, %s is %s%s" % (got, g.dtype, g.shape, want,
                                                             w.dtype, w.shape))
    if not np.allclose(g, w, rtol=1e-4, atol=1e-6):
        raise SystemExit("compare: %s differs from %s by up to %g" % (got, want,
                                                                      np.abs(g - w).max()))


def write_case(d, model, inputs):
    """model.onnx plus one test_data_set_K per entry of inputs (dicts)."""
    onnx.checker.check_model(model)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, feeds in enumerate(inputs):
        ds = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(ds, exist_ok=True)
        env = {}
        for i, vi in enumerate(model.graph.input):
            if vi.name in feeds:
                save(os.path.join(ds, "input_%d.pb" % i), feeds[vi.name], vi.name)
                env[vi.name] = feeds[vi.name]
        outs = run_graph(model.graph, env)
        for i, (vi, val) in enumerate(zip(model.graph.output, outs)):
            save(os.path.join(ds, "output_%d.pb" % i), val, vi.name)


def cmd_standard_mlp(d):
    rng = np.random.RandomState(7)
    w1 = rng.randn(20, 16).astype(np.float32) * 0.3
    b1 = rng.randn(16).astype(np.float32) * 0.1
    w2 = rng.randn(5, 16).astype(np.float32) * 0.3
    b2 = rng.randn(5).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Constant", [], ["shape"], name="shape",
                         value=numpy_helper.from_array(np.array([-1, 20], np.int64))),
        helper.make_node("Reshape", ["image", "shape"], ["x"], name="flatten"),
        helper.make_node("MatMul", ["x", "W1"], ["xw"], name="fc1"),
        helper.make_node("Add", ["xw", "b1"], ["h"], name="fc1_bias"),
        helper.make_node("Relu", ["h"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "W2", "b2"], ["logits"], name="fc2", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    g = helper.make_graph(
        nodes, "standard_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 4, 5])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(b2, "b2")])
    m = helper.make_model(g, producer_name="onnx.helper",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    write_case(d, m, [{"image": rng.rand(1, 4, 5).astype(np.float32)},
                      {"image": rng.rand(8, 4, 5).astype(np.float32)}])


def cmd_control_flow(d):
    """y = sum(x) > 0 ? x * 2 : tanh(x); acc = x summed over 3 Loop trips."""
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Tanh", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3])])
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Loop", ["trips", "", "init"], ["acc"], body=body),
    ]
    g = helper.make_graph(
        nodes, "control_flow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([0], np.int64), "axes"),
         numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
         numpy_helper.from_array(np.array(3, np.int64), "trips"),
         numpy_helper.from_array(np.zeros(3, np.float32), "init"), two])
    m = helper.make_model(g, producer_name="onnx.helper",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    write_case(d, m, [{"x": np.array([1.0, -0.5, 2.0], np.float32)},
                      {"x": np.array([-1.0, -0.5, 0.25], np.float32)}])


def cmd_rename_output(src, dst, name):
    m = onnx.load(src)
    old = m.graph.output[0].name
    m.graph.output[0].name = name
    for n in m.graph.node:
        n.output[:] = [name if o == old else o for o in n.output]
    onnx.save(m, dst)


def cmd_drop_op_type(src, dst):
    """The first node's op_type (NodeProto field 4) removed: issue 21's crash."""
    m = onnx.load(src)
    m.graph.node[0].ClearField("op_type")
    onnx.save(m, dst)


def cmd_perturb(path):
    t = onnx.load_tensor(path)
    a = numpy_helper.to_array(t).copy()
    a.reshape(-1)[0] += 1.0
    save(path, a, t.name)


def graph_ops(g, acc):
    for n in g.node:
        acc.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, acc)


def cmd_ops(*dirs):
    acc = set()
    for d in dirs:
        for root, _, files in os.walk(d):
            if "model.onnx" in files:
                # the BB-only ops (Zeros, Ones, Dot, Scatter) fail onnx.checker, not load
                graph_ops(onnx.load(os.path.join(root, "model.onnx")).graph, acc)
    print("\n".join(sorted(acc)))


def cmd_onnx_node_cases(out_dir, ops_file):
    """ONNX's own node test cases (onnx.backend.test.case.node, the generator
    behind the backend test data) whose graphs use only the ops listed in
    ops_file and only numeric tensors, written in the test-data layout."""
    import warnings
    with warnings.catch_warnings():  # onnx 1.12's cases predate numpy 1.24
        warnings.simplefilter("ignore")
        for alias, typ in (("float", float), ("int", int), ("bool", bool), ("object", object),
                           ("complex", complex)):
            if not hasattr(np, alias):
                setattr(np, alias, typ)
    from onnx.backend.test.case import node as node_cases
    ours = set(open(ops_file).read().split())
    unsupported = {TensorProto.STRING, TensorProto.BFLOAT16}
    written = 0
    for case in node_cases.collect_testcases(None):
        g = case.model.graph
        used = set()
        graph_ops(g, used)
        ports = list(g.input) + list(g.output)
        if not used or not used <= ours or any(
                not p.type.HasField("tensor_type") or
                p.type.tensor_type.elem_type in unsupported for p in ports):
            continue
        d = os.path.join(out_dir, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, "test_data_set_%d" % i)
            os.makedirs(ds, exist_ok=True)
            for kind, vals, decl in (("input", inputs, g.input), ("output", outputs, g.output)):
                for j, v in enumerate(vals):
                    save(os.path.join(ds, "%s_%d.pb" % (kind, j)), v, decl[j].name)
        written += 1
    print(written)


def main(argv):
    cmds = {"reference": cmd_reference, "reference-function": cmd_reference_function,
            "compare": cmd_compare,
            "standard-mlp": cmd_standard_mlp, "control-flow": cmd_control_flow,
            "rename-output": cmd_rename_output, "onnx-node-cases": cmd_onnx_node_cases, "perturb": cmd_perturb,
            "drop-op-type": cmd_drop_op_type, "ops": cmd_ops,
            "input": lambda out, name, rows, cols, seed: save(
                out, np.random.RandomState(int(seed)).rand(int(rows), int(cols))
                .astype(np.float32), name)}
    if len(argv) < 2 or argv[1] not in cmds:
        raise SystemExit(__doc__)
    cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
