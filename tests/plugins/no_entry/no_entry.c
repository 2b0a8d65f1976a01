/* no_entry.c — test plugin that is a valid shared object but exports no
 * bb_plugin_entry (a misspelt one instead): the loader must refuse it. */
#include "bb/plugin.h"

BB_PLUGIN_EXPORT int bb_plugin_entri(void);

BB_PLUGIN_EXPORT int bb_plugin_entri(void)
{
    return 42;
}
