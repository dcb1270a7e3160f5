/* SPDX-License-Identifier: MIT */
/*
 * fuzz_batch.c - libFuzzer driver for the batch decoder (storage/batch.h).
 *
 * The input is treated like the bytes of a segment file: batches are walked
 * one after another with pulse_batch_parse_header, pulse_batch_verify and the
 * record and header iterators, and every byte of every slice the decoder
 * hands back is read, so a pointer or length outside the input shows up under
 * ASan. The iterator also runs on batches that failed verification: it must
 * be safe on unverified bytes too, compressed ones (inflated into a scratch
 * buffer) included.
 *
 * Built two ways from this one file:
 *   - with --enable-fuzzing (clang, -fsanitize=fuzzer): the libFuzzer target
 *     tests/fuzz/fuzz_batch;
 *   - linked with fuzz_replay.c, in every build: tests/fuzz/fuzz_batch_replay,
 *     a plain program that feeds each file of the corpus directory (argv[1],
 *     else $PULSE_SRCDIR/tests/fuzz/corpus/batch) to the same entry point, so
 *     make check replays the corpus without libFuzzer.
 */
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "storage/batch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A sink the compiler cannot drop, so the reads below really happen. */
static volatile uint8_t fuzz_sink;

static void touch(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc ^= p[i];
    fuzz_sink ^= acc;
}

static void walk_records(const uint8_t *data, size_t size)
{
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    struct pulse_buf inflated; /* a compressed batch's records */
    pulse_buf_init(&inflated, PULSE_BATCH_INFLATED_MAX);
    if (pulse_batch_iter_open(&it, data, size, &inflated) != PULSE_OK) {
        pulse_buf_fini(&inflated);
        return;
    }
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        if (rec.key != NULL)
            touch(rec.key, rec.key_len);
        if (rec.value != NULL)
            touch(rec.value, rec.value_len);
        size_t pos = 0;
        struct pulse_header_view hv;
        while (pulse_record_header_next(&rec, &pos, &hv) == PULSE_OK) {
            touch(hv.key, hv.key_len);
            if (hv.value != NULL)
                touch(hv.value, hv.value_len);
        }
    }
    pulse_buf_fini(&inflated);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t pos = 0;
    while (pos < size) {
        struct pulse_batch_header hdr;
        int64_t last = -1;
        if (pulse_batch_parse_header(data + pos, size - pos, &hdr) != PULSE_OK)
            break;
        pulse_status_t st = pulse_batch_verify(data + pos, size - pos, &hdr, &last);
        if (st == PULSE_OK && (last < hdr.base_offset))
            __builtin_trap(); /* a verified batch names at least its base offset */
        walk_records(data + pos, size - pos);
        pos += pulse_batch_total_size(&hdr);
    }
    return 0;
}
