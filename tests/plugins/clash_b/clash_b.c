/* clash_b.c — test plugin: bb_test_clash_value() returns 2 (see ../clash.h). */
#define CLASH_VALUE 2
#define CLASH_TYPE "clash::B"
#define CLASH_NAME "clash_b"
#include "../clash.h"
