/*
 * recorder_write.c — bb_recorder_write: build the recording and save it
 * (kept apart from recorder_build.c so the recorder core does not depend
 * on the protobuf boundary).
 */
#include "bb/model_io.h"
#include "bb/recorder.h"

int bb_recorder_write(bb_recorder *r, bb_module *root, const char *path, bb_error *err)
{
    if (!path)
        return bb_error_set(err, BB_EINVAL, "recorder write: NULL path");
    bb_model *m = NULL;
    int rc = bb_recorder_build(r, root, &m, err);
    if (rc)
        return rc;
    rc = bb_model_save_file(m, path, err);
    bb_model_free(m);
    return rc;
}
