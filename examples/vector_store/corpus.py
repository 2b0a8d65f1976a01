#!/usr/bin/python3
"""Writes a synthetic clustered corpus for the vector store example.

    corpus.py OUTDIR [--rows N] [--dim D] [--seed S]

OUTDIR/corpus.pb   f32 [N, D] TensorProto: the seed corpus (ids 0..N-1 in
                   the store, in row order)
OUTDIR/query.pb    f32 [D]: corpus row 7 with a little noise
OUTDIR/exact.json  the exact 10 nearest corpus rows of query.pb (squared L2)

Points sit around N/200 centres, each spread along a few random
directions, as embeddings do (a low intrinsic dimension). numpy and onnx
come with python3-onnx (scripts/deps).
"""
import argparse
import json
import os

import numpy as np
from onnx import numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.rows < 256 or a.dim < 1:
        ap.error("need --rows >= 256 (IvfPq trains 256 codewords) and --dim >= 1")
    rng = np.random.default_rng(a.seed)
    clusters = max(1, a.rows // 200)
    centre = rng.normal(0, 4, (clusters, a.dim))
    spread = rng.normal(0, 1, (clusters, 4, a.dim))
    which = rng.integers(0, clusters, a.rows)
    weights = rng.normal(0, 0.5, (a.rows, 4))
    x = centre[which] + np.einsum("nk,nkd->nd", weights, spread[which])
    x = (x + rng.normal(0, 0.1, x.shape)).astype(np.float32)
    q = (x[7] + rng.normal(0, 0.05, a.dim)).astype(np.float32)
    exact = np.argsort(((x - q) ** 2).sum(axis=1), kind="stable")[:10]
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "corpus.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x).SerializeToString())
    with open(os.path.join(a.outdir, "query.pb"), "wb") as f:
        f.write(numpy_helper.from_array(q).SerializeToString())
    with open(os.path.join(a.outdir, "exact.json"), "w") as f:
        json.dump([int(i) for i in exact], f)


if __name__ == "__main__":
    main()
