/* clash_a.c — test plugin: bb_test_clash_value() returns 1 (see ../clash.h). */
#define CLASH_VALUE 1
#define CLASH_TYPE "clash::A"
#define CLASH_NAME "clash_a"
#include "../clash.h"
