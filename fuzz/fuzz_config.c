/*
 * fuzz_config.c — a node config file (bbd.json(5)) as bbd reads it: loaded
 * over the defaults (bbd_config_load_mem) and finished
 * (bbd_config_finish: derived paths, every address parsed). Seeds:
 * fuzz/seeds/fuzz_config and the configs of the examples.
 */
#include <stdint.h>

#include "bbd/host/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bbd_config c;
    bbd_config_init(&c);
    bb_error err = {0};
    if (bbd_config_load_mem(&c, (const char *)data, size, "fuzz.json", "/nonexistent", &err) ==
        BB_OK) {
        if (!c.state_dir)
            bbd_config_set_str(&c.state_dir, "/nonexistent/state", &err);
        bbd_config_finish(&c, &err);
    }
    bbd_config_free(&c);
    return 0;
}
