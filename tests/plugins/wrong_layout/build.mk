# wrong_layout: compiled against a copy of bb/value.h with
# BB_VALUE_LIST_INLINE 9 instead of 10 (the plugin's _Static_assert checks
# that the copy took). Its directory comes first on the include path, so
# bb/plugin.h's #include "bb/value.h" finds the copy.
WRONG_LAYOUT_INC = $(B)/tests/plugins/wrong_layout/include
TPLUGIN_CFLAGS_wrong_layout = -I$(WRONG_LAYOUT_INC)
$(B)/obj/tests/plugins/wrong_layout/wrong_layout.o: $(WRONG_LAYOUT_INC)/bb/value.h
$(WRONG_LAYOUT_INC)/bb/value.h: libbbir/include/bb/value.h
	@mkdir -p $(dir $@)
	sed 's/^#define BB_VALUE_LIST_INLINE 10 /#define BB_VALUE_LIST_INLINE 9 /' $< >$@
