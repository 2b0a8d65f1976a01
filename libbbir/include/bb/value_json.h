/*
 * value_json.h — runtime values as JSON, both ways: bbd's control socket
 * (bbctl(1) documents the forms) and bbsim's event lines print and read
 * values in these forms.
 *
 *   Trigger          {"type":"Trigger"}            (input: also null)
 *   tensor           {"type":"tensor","dtype":"float","shape":[2,2],"data":[1,2,3,4]}
 *                    {"type":"tensor","dtype":"float","shape":[...],"tensor_proto":"<base64>"}
 *                    (input: "type" may be left out; a bare, possibly nested,
 *                    JSON array is a float tensor of that shape; "dtype"
 *                    defaults to "float")
 *   U64 and ids      {"type":"U64","value":7}      (also RequestId, Timestamp, ...;
 *                    values above 2^53 are decimal strings)
 *   Bytes            {"type":"Bytes","base64":"..."}
 *   PeerId           {"type":"PeerId","peer":"12D3KooW..."}
 *   Multiaddress     {"type":"Multiaddress","addr":"/ip4/127.0.0.1/tcp/7001"}
 *   vectors          {"type":"peer_id_vec"|"address_vec"|"Composite","items":[...]}
 *   ResponseBatch    {"type":"ResponseBatch","items":[{"peer":"...","value":{...}}]}
 *   raw wire bytes   {"wire":"<base64>"}  (input only: decoded by the input's
 *                    declared type, as bytes from the network would be)
 *
 * Tensors print their data while they have at most max_elems elements (and
 * a dtype JSON numbers can carry); bigger ones print as base64 TensorProto.
 * Every input is untrusted: shapes, counts, ranges and nesting are checked
 * and errors name the input and the problem.
 */
#ifndef BB_VALUE_JSON_H
#define BB_VALUE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "bb/status.h"
#include "bb/value.h"

#define BB_VALUE_JSON_MAX_DEPTH 16

/* New JSON object (NULL on out-of-memory); the caller deletes it. */
cJSON *bb_value_to_json(const bb_value *v, size_t max_elems);

/* A named input parsed from JSON: either a value or wire bytes. */
typedef struct bb_json_input {
    char *name;
    bb_value *value; /* owned reference, or NULL */
    uint8_t *bytes;  /* owned wire bytes, or NULL */
    size_t len;
} bb_json_input;

/* Parse the input called name from j (borrowed) into *out, which owns what
 * it holds until bb_json_input_free. Errors name the input and the problem. */
int bb_json_input_parse(const char *name, const cJSON *j, bb_json_input *out, bb_error *err);
void bb_json_input_free(bb_json_input *in);

#endif
