/*
 * bb/bytes.h — the byte writer and the bounded byte reader that the binary
 * formats outside protobuf are written and read with: engine snapshots,
 * component snapshots (plugins), the transport handshake.
 *
 * Writer. A zeroed bb_writer is an empty growable writer (a malloc'd
 * buffer, doubled as needed; bb_writer_take hands it over, bb_writer_free
 * drops it); bb_writer_init_fixed writes into a caller's buffer instead and
 * never allocates. A put that cannot be done (allocation failed, the fixed
 * buffer is full, the size would overflow) marks the writer failed, and
 * every later put does nothing: a format is written straight through and
 * checked once, at the end.
 *
 * Reader. Never reads past its length. The first get that cannot be done
 * marks the reader failed and records where (fail_at: the byte offset the
 * failed item starts at), what (why) and a status (BB_ETRUNC when the data
 * ended, BB_EPARSE when the bytes are malformed, or what the caller passed
 * to bb_reader_fail); every later get fails too, so a decoder may read a
 * whole record and check once. Outputs of a failed get are zero / NULL;
 * bb_reader_get leaves its destination untouched.
 *
 * Integers: unsigned varints (bb/uvarint.h, the one varint codec) and
 * fixed-width little-endian. bb_writer_put / bb_reader_get copy raw bytes:
 * arrays of floats so written are in host order, which is little-endian on
 * every host libbbir builds for (value_wire.c refuses the others).
 *
 * Ownership: the writer owns its growable buffer until bb_writer_take; the
 * reader borrows its data.
 */
#ifndef BB_BYTES_H
#define BB_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct bb_writer {
    uint8_t *data;
    size_t len, cap;
    bool fixed;  /* data is the caller's: never grown, never freed */
    bool failed; /* a put could not be done; later puts do nothing */
} bb_writer;

/* Write into buf[0..cap) (borrowed); a put that does not fit fails. */
void bb_writer_init_fixed(bb_writer *w, void *buf, size_t cap);
void bb_writer_put(bb_writer *w, const void *src, size_t n);
/* Append n > 0 bytes for the caller to fill (an encoder writing in
 * place); returns where they start, NULL when the writer failed. */
uint8_t *bb_writer_grow(bb_writer *w, size_t n);
void bb_writer_put_u8(bb_writer *w, uint8_t v);
void bb_writer_put_u32le(bb_writer *w, uint32_t v);
void bb_writer_put_u64le(bb_writer *w, uint64_t v);
/* v as an unsigned varint (minimal encoding, 1..10 bytes). */
void bb_writer_put_uvarint(bb_writer *w, uint64_t v);
/* A length-delimited run: uvarint(n), then src[0..n). */
void bb_writer_put_delimited(bb_writer *w, const void *src, size_t n);
/* A string, length-delimited, without its NUL (NULL writes ""). */
void bb_writer_put_str(bb_writer *w, const char *s);
/* Empty the writer, keeping its buffer; clears failed. */
void bb_writer_reset(bb_writer *w);
/* Hand over a growable writer's buffer (malloc'd; NULL when empty) and
 * leave the writer empty. False when a put failed: the buffer is freed and
 * *out is NULL. */
bool bb_writer_take(bb_writer *w, uint8_t **out, size_t *len);
/* Free a growable writer's buffer (a fixed writer's is the caller's). */
void bb_writer_free(bb_writer *w);

typedef struct bb_reader {
    const uint8_t *data;
    size_t len, pos;
    bool failed;
    int status;      /* when failed: BB_ETRUNC, BB_EPARSE or the caller's */
    size_t fail_at;  /* when failed: offset where the failed item starts */
    const char *why; /* when failed: what went wrong there (static text) */
} bb_reader;

/* Read data[0..len) (borrowed). */
void bb_reader_init(bb_reader *r, const void *data, size_t len);
/* Bytes not yet read. */
size_t bb_reader_left(const bb_reader *r);
/* Room for count items of size bytes each (checked before allocating). */
bool bb_reader_has(const bb_reader *r, size_t count, size_t size);
bool bb_reader_get(bb_reader *r, void *dst, size_t n);
/* The next n bytes in place. */
bool bb_reader_view(bb_reader *r, size_t n, const uint8_t **out);
bool bb_reader_u8(bb_reader *r, uint8_t *v);
bool bb_reader_u32le(bb_reader *r, uint32_t *v);
bool bb_reader_u64le(bb_reader *r, uint64_t *v);
/* An unsigned varint as protobuf reads it: any encoding up to 10 bytes
 * that fits 64 bits. */
bool bb_reader_uvarint(bb_reader *r, uint64_t *v);
/* The same, minimal encodings only (multiformats, the transport). */
bool bb_reader_uvarint_minimal(bb_reader *r, uint64_t *v);
/* A length-delimited run (bb_reader_uvarint length), in place. */
bool bb_reader_delimited(bb_reader *r, const uint8_t **out, size_t *len);
/* Mark the reader failed at offset at (a value that decoded but makes no
 * sense); keeps an earlier failure. Returns false. */
bool bb_reader_fail(bb_reader *r, size_t at, int status, const char *why);

#endif
