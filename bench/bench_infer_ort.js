// ONNX Runtime's side of bench_train: inference of the models bench_train
// wrote (DIR/mlp.onnx, DIR/cnn.onnx) on one thread, minus ORT's per-call
// overhead (the binding, the input and output copies) measured on
// DIR/identity.onnx with the same input. Prints "<case> <seconds>" lines
// (the best of 7 trials), or one line saying why it is skipped (exit 0)
// when onnxruntime-node is not installed (make bench installs it into
// <build>/bench/ort; NODE_PATH points there).
//
//   node bench_infer_ort.js DIR TRIAL_S
let ort;
try {
    ort = require("onnxruntime-node");
} catch (e) {
    console.log("ONNX Runtime baseline skipped: onnxruntime-node is not installed " +
                "(make bench installs it)");
    process.exit(0);
}

const [dir, trialArg] = process.argv.slice(2);
const trialS = Number(trialArg || 0.4);

async function timeRuns(session, feeds) {
    const name = session.outputNames[0];
    const once = async () => (await session.run(feeds, [name]))[name];
    await once();
    let reps = 1;
    for (;;) {
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < reps; i++) await once();
        if (Number(process.hrtime.bigint() - t0) * 1e-9 > trialS / 4 || reps > 1 << 20) break;
        reps *= 2;
    }
    const trials = [];
    for (let k = 0; k < 7; k++) {
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < reps; i++) await once();
        trials.push(Number(process.hrtime.bigint() - t0) * 1e-9 / reps);
    }
    return Math.min(...trials);
}

async function open(file) {
    return ort.InferenceSession.create(`${dir}/${file}`, {
        intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential",
        graphOptimizationLevel: "all",
    });
}

async function main() {
    const identity = await open("identity.onnx");
    const models = {mlp: await open("mlp.onnx"), cnn: await open("cnn.onnx")};
    for (const [name, model, batch] of [["mlp_1", "mlp", 1], ["mlp_64", "mlp", 64],
                                        ["cnn_64", "cnn", 64]]) {
        const data = Float32Array.from({length: batch * 784}, (_, i) => Math.sin(i));
        const feeds = {input: new ort.Tensor("float32", data, [batch, 784])};
        const full = await timeRuns(models[model], feeds);
        const overhead = await timeRuns(identity, feeds);
        console.log(`${name} ${(full - overhead).toFixed(9)}`);
    }
}

main().catch((e) => { console.error(`bench_infer_ort: ${e.message}`); process.exit(1); });
