/*
 * test_pass_stamp_compilation_metadata.c — the passport, one binding
 * triple per partition slot, RECV_SLOT_ID on receives feeding role nodes,
 * the partition hash/id, canonical ordering, and a binding config turned
 * into construction state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

static void test_stamps(void **state)
{
    (void)state;
    bb_function *f;
    bb_model *m = fx_model(&f);
    fx_concrete(m, f, "model", "nn::Mlp", "Model");
    fx_generic(m, f, "sel", "PeerSelector");
    bbc_bindings b;
    bbc_bindings_init(&b);
    assert_int_equal(bbc_bindings_add(&b, "sel", "peers::Connected", "{\"target\":\"X\"}", "b.json",
                                      NULL), BB_OK);
    bb_type_source ts;
    bb_type_array arr;
    fx_types(&ts, &arr);
    bbc_state st;
    bbc_error err;
    assert_int_equal(fx_state(&st, m, NULL, &ts, &b, &err), BB_OK);
    bbc_partition *p = fx_wire_part(&st);
    /* Declarations in non-canonical order. */
    bb_str_list_push(p->model->arena, &p->fn->attributes, "sel");
    fx_concrete(p->model, p->fn, "model", "nn::Mlp", "Model");
    bb_kv_set(p->model->arena, &p->fn->metadata, "zzz", "last");
    assert_int_equal(fx_run(&st, "resolve_slots"), BB_OK);
    assert_int_equal(fx_run(&st, "stamp_compilation_metadata"), BB_OK);
    const bb_model *pm = p->model;
    assert_string_equal(bb_kv_get(&pm->metadata, BB_META_COMPILED), "v1");
    char want[64];
    snprintf(want, sizeof want, "Model|nn::Mlp|%u", bbc_state_slot(&st, "model")->slot_id);
    assert_string_equal(bb_kv_get(&pm->metadata, "ai.bytesandbrains.binding.@self.model"), want);
    snprintf(want, sizeof want, "PeerSelector|peers::Connected|%u", bbc_state_slot(&st, "sel")->slot_id);
    assert_string_equal(bb_kv_get(&pm->metadata, "ai.bytesandbrains.binding.@self.sel"), want);
    /* The receive feeds LoadParameters on "model". */
    const bb_node *r = fx_named(p->fn, "recv");
    assert_string_equal(bbc_meta(r, BB_META_RECV_SLOT_ID), bbc_meta(fx_named(p->fn, "load"), BB_META_SLOT_ID));
    /* Hash and id. */
    const char *h = bb_kv_get(&p->fn->metadata, BB_META_PARTITION_HASH);
    assert_int_equal(strlen(h), 16);
    snprintf(want, sizeof want, "@self#%s", h);
    assert_string_equal(bb_kv_get(&p->fn->metadata, BB_META_PARTITION_ID), want);
    /* Canonical order: metadata sorted by key, declarations by name. */
    for (size_t i = 1; i < p->fn->metadata.n; i++)
        assert_true(strcmp(p->fn->metadata.v[i - 1].key, p->fn->metadata.v[i].key) < 0);
    assert_string_equal(p->fn->metadata.v[p->fn->metadata.n - 1].key, "zzz");
    /* The config became sel's construction state. */
    assert_int_equal(bb_str_list_find(&p->fn->attributes, "sel"), -1);
    const bb_attr *sel = p->fn->attribute_protos.v[p->fn->attribute_protos.n - 1];
    assert_string_equal(sel->name, "sel");
    assert_memory_equal(sel->s.data, "{\"target\":\"X\"}", sel->s.len);
    assert_string_equal(bb_kv_get(&p->fn->metadata, "ai.bytesandbrains.concrete_type.sel"),
                        "peers::Connected");
    /* opset_import: exactly what the body uses, sorted. */
    assert_true(bb_opset_list_version(&p->fn->opset_imports, BB_DOMAIN_WIRE) >= 1);
    assert_int_equal(bb_opset_list_version(&p->fn->opset_imports, BB_DOMAIN_SYSCALL), -1);
    /* A second run changes nothing. */
    uint64_t hv = bbc_hash_nodes(p->fn);
    size_t nm = p->fn->metadata.n;
    assert_int_equal(fx_run(&st, "stamp_compilation_metadata"), BB_OK);
    assert_int_equal(bbc_hash_nodes(p->fn), hv);
    assert_int_equal(p->fn->metadata.n, nm);
    bbc_state_free(&st);
    bbc_bindings_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stamps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
