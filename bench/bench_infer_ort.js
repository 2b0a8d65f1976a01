// ONNX Runtime's side of bench_train: inference of the models bench_train
// wrote (DIR/mlp.onnx, DIR/cnn.onnx) on one thread, two ways:
//  - ORT's own profiler: each of 700 runs (after 50 to warm up) as ORT's
//    "model_run" event records it (the session's run without the Node
//    binding; the per-node events it also records cost it a little):
//    "<case>_run" the shortest, "<case>_run_med" the median. bench_train
//    times its own calls the same way (the same counts, per call), so these
//    compare like with like;
//  - the binding's call time minus ORT's per-call overhead, measured on
//    Identity models: (Identity of the input's size + Identity of the
//    output's size) / 2, since an Identity moves its size in and out, a
//    model its input in and its output out; each Identity's overhead is its
//    call less its one kernel (ORT's Identity kernel copies the tensor — for
//    the 64 x 784 input a 200 KB copy that is the model's work, not the
//    binding's: counting it as overhead took ~2 us off ORT's MLP figure).
//    The kernel's time is the shortest "<node>_kernel_time" event of ORT's
//    profiler over 700 runs; the rest of the session's run (input checks,
//    output allocation, profiling) stays in the overhead, which favours ORT.
//    An estimate (the overhead is modelled), two ways: "<case>_call" from
//    the shortest of 700 single calls (after 50 to warm up) of the model and
//    of each Identity, which a loaded machine disturbs least; "<case>" from
//    the best of 7 trials of a mean over many calls.
// Prints "<case> <seconds>" lines, or one line saying why it is skipped
// (exit 0) when onnxruntime-node is not installed (make bench installs it
// into <build>/bench/ort; NODE_PATH points there).
//
//   node bench_infer_ort.js DIR TRIAL_S
const fs = require("fs");
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

/* The shortest of 700 single calls, after 50 to warm up. */
async function shortestCall(session, feeds) {
    const name = session.outputNames[0];
    for (let i = 0; i < 50; i++) await session.run(feeds, [name]);
    let best = Infinity;
    for (let i = 0; i < 700; i++) {
        const t0 = process.hrtime.bigint();
        await session.run(feeds, [name]);
        best = Math.min(best, Number(process.hrtime.bigint() - t0) * 1e-9);
    }
    return best;
}

async function open(file, profile) {
    return ort.InferenceSession.create(`${dir}/${file}`, {
        intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: "sequential",
        graphOptimizationLevel: "all", enableProfiling: !!profile,
        profileFilePrefix: `${dir}/profile`,
    });
}

/* [shortest, median] model_run of 700 runs and the shortest of each
 * node's kernel times summed over the nodes, from ORT's profile. */
async function profiledRun(file, feeds) {
    const s = await open(file, true);
    for (let i = 0; i < 50; i++) await s.run(feeds);
    for (let i = 0; i < 700; i++) await s.run(feeds);
    s.endProfiling(); /* writes DIR/profile_<date>.json (the binding returns no name) */
    const files = fs.readdirSync(dir).filter((f) => f.startsWith("profile"));
    if (files.length !== 1)
        throw new Error(`expected one profile in ${dir}, found ${files.length}`);
    const events = JSON.parse(fs.readFileSync(`${dir}/${files[0]}`));
    fs.unlinkSync(`${dir}/${files[0]}`);
    const runs = events.filter((e) => e.name === "model_run").map((e) => e.dur).slice(-700);
    runs.sort((a, b) => a - b);
    const kernel = {};
    for (const e of events)
        if (e.cat === "Node" && e.name.endsWith("_kernel_time"))
            kernel[e.name] = Math.min(kernel[e.name] ?? Infinity, e.dur);
    const kernels = Object.values(kernel).reduce((a, b) => a + b, 0);
    return [runs[0] * 1e-6, runs[runs.length >> 1] * 1e-6, kernels * 1e-6];
}

async function main() {
    const idIn = await open("identity_in.onnx"), idOut = await open("identity_out.onnx");
    const models = {mlp: await open("mlp.onnx"), cnn: await open("cnn.onnx")};
    const feed = (batch, width) => ({input: new ort.Tensor(
        "float32", Float32Array.from({length: batch * width}, (_, i) => Math.sin(i)),
        [batch, width])});
    /* an Identity's kernel (its copy) at each batch: the model's work, not
     * overhead; profiled once per batch size (two cases share batch 64) */
    const kernels = new Map();
    const idKernel = async (batch) => {
        if (!kernels.has(batch))
            kernels.set(batch, ((await profiledRun("identity_in.onnx", feed(batch, 784)))[2] +
                                (await profiledRun("identity_out.onnx", feed(batch, 10)))[2]) / 2);
        return kernels.get(batch);
    };
    for (const [name, model, batch] of [["mlp_1", "mlp", 1], ["mlp_64", "mlp", 64],
                                        ["cnn_64", "cnn", 64]]) {
        const kernel = await idKernel(batch);
        const full = await timeRuns(models[model], feed(batch, 784));
        const overhead = (await timeRuns(idIn, feed(batch, 784)) +
                          await timeRuns(idOut, feed(batch, 10))) / 2 - kernel;
        console.log(`${name} ${(full - overhead).toFixed(9)}`);
        const call = await shortestCall(models[model], feed(batch, 784));
        const callOverhead = (await shortestCall(idIn, feed(batch, 784)) +
                              await shortestCall(idOut, feed(batch, 10))) / 2 - kernel;
        console.log(`${name}_call ${(call - callOverhead).toFixed(9)}`);
    }
    for (const [name, model, batch] of [["mlp_1", "mlp", 1], ["mlp_64", "mlp", 64],
                                        ["cnn_64", "cnn", 64]]) {
        const [min, med] = await profiledRun(`${model}.onnx`, feed(batch, 784));
        console.log(`${name}_run ${min.toFixed(9)}`);
        console.log(`${name}_run_med ${med.toFixed(9)}`);
    }
}

main().catch((e) => { console.error(`bench_infer_ort: ${e.message}`); process.exit(1); });
