/*
 * run.h — `bbd run`: compile a model in memory, run one target once in an
 * in-process engine with the bound plugins (no network, no daemon) and
 * write its outputs; or check an ONNX backend test-data directory
 * (--test-dir). See bbd(8), section "RUNNING A MODEL ONCE".
 */
#ifndef BBD_HOST_RUN_H
#define BBD_HOST_RUN_H

/* argv[0] is "run". Returns the exit status: 0 success, 1 bad input or a
 * failed run / mismatch ("bbd: error: ..." on stderr), 2 bad usage. */
int bbd_run_main(int argc, char **argv);

#endif
