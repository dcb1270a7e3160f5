/* SPDX-License-Identifier: MIT */
/*
 * fuzz_segscan.c - libFuzzer driver for the segment iterator and its resync
 * (storage/segscan.h) and for the damage record decoder (storage/damage.h).
 *
 * The input is the content of a segment file (held in a memfd, since the
 * iterator reads through a descriptor). The walk must tile the file exactly:
 * items follow each other without gap or overlap from byte 0 to the end, a
 * batch it calls valid verifies on its own, offsets only grow (a batch's
 * base is at least the end of what came before, a damaged range's offsets
 * run forwards), and only the last item may be a tail. Any break of that
 * aborts. The same bytes walked as a buffer (pulse_segscan_init_mem) must
 * give exactly the same items; a STOP walk the same items up to the first
 * damage, which it reports as a tail at the same place; a TRUST walk (headers
 * only) the same batches up to that damage too. The same bytes are also fed
 * to pulse_damage_decode, whose output, when accepted, must satisfy
 * pulse_damage_valid.
 *
 * Built like fuzz_batch.c: a libFuzzer target with --enable-fuzzing, and
 * always fuzz_segscan_replay (with fuzz_replay.c), which make check runs
 * over the batch corpus (whose files are segment-like byte streams).
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/alloc.h"
#include "storage/batch.h"
#include "storage/damage.h"
#include "common/fsio.h"
#include "storage/segscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ITEMS 4096

/* What the checks compare of an item. */
struct seen {
    enum pulse_segscan_kind kind;
    uint64_t pos, end;
    int64_t from, next_base, last;
    bool tail;
};

static struct seen seen_of(const struct pulse_segscan_item *it)
{
    struct seen s = {it->kind, it->pos, it->end, it->from, it->next_base, 0, it->tail};
    if (it->kind == PULSE_SEGSCAN_BATCH)
        s.last = it->last_offset;
    return s;
}

static bool same(const struct seen *a, const struct seen *b)
{
    return a->kind == b->kind && a->pos == b->pos && a->end == b->end && a->last == b->last &&
           (a->kind == PULSE_SEGSCAN_BATCH ||
            (a->from == b->from && a->next_base == b->next_base && a->tail == b->tail));
}

/* The full walk of the file; its first MAX_ITEMS items go to out. */
static void walk(int fd, size_t size, struct seen *out, size_t *n)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    uint64_t pos = 0;
    int64_t expect = 0;
    bool tail = false;

    *n = 0;
    pulse_segscan_init(&sc, pulse_io_posix(), fd, "fuzz", 0, size, 0, 0, INT64_MAX, 0);
    while (pulse_segscan_next(&sc, &it) == PULSE_OK && it.kind != PULSE_SEGSCAN_END) {
        if (tail || it.pos != pos || it.end <= it.pos || it.end > size)
            abort();
        if (it.kind == PULSE_SEGSCAN_BATCH) {
            struct pulse_batch_header hdr;
            int64_t last = 0;
            if (pulse_batch_verify(it.batch, (size_t)(it.end - it.pos), &hdr, &last) != PULSE_OK ||
                hdr.base_offset < expect || last != it.last_offset)
                abort();
            expect = last + 1;
        } else {
            if (it.from != expect || (!it.tail && it.next_base < it.from) || (it.tail && it.end != size))
                abort();
            tail = it.tail;
            if (!it.tail)
                expect = it.next_base;
        }
        pos = it.end;
        if (*n < MAX_ITEMS)
            out[(*n)++] = seen_of(&it);
    }
    if (pos != size && !tail)
        abort();
    pulse_segscan_fini(&sc);
}

/* The same bytes as a buffer: with the same rule, the same items; STOP and
 * TRUST | STOP walks agree with the full walk up to its first damage. */
static void walk_mem(const uint8_t *data, size_t size, const struct seen *full, size_t n)
{
    static const unsigned modes[] = {0, PULSE_SEGSCAN_STOP, PULSE_SEGSCAN_TRUST | PULSE_SEGSCAN_STOP};
    struct pulse_segscan sc;
    struct pulse_segscan_item it;

    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        size_t i = 0;
        pulse_segscan_init_mem(&sc, data, size, modes[m]);
        sc.seg_base = 0; /* the file walk's 32-bit index check */
        while (pulse_segscan_next(&sc, &it) == PULSE_OK && it.kind != PULSE_SEGSCAN_END && i < n) {
            struct seen s = seen_of(&it);
            if (it.kind == PULSE_SEGSCAN_BATCH && it.batch != data + it.pos)
                abort();
            if (same(&s, &full[i])) {
                i++;
                if (it.kind == PULSE_SEGSCAN_DAMAGE && (modes[m] & PULSE_SEGSCAN_STOP))
                    break;
                continue;
            }
            if ((modes[m] & PULSE_SEGSCAN_TRUST) && it.pos == full[i].pos)
                break; /* headers only: it may take a batch with a bad body */
            if ((modes[m] & PULSE_SEGSCAN_STOP) && full[i].kind == PULSE_SEGSCAN_DAMAGE &&
                it.kind == PULSE_SEGSCAN_DAMAGE && it.pos == full[i].pos && it.tail && it.end == size)
                break; /* STOP: the first damage, as a tail */
            abort();
        }
        pulse_segscan_fini(&sc);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pulse_damage *d = NULL;
    size_t n = 0;
    int fd = memfd_create("fuzz-segment", 0);

    if (fd < 0)
        return 0;
    if (size == 0 || write(fd, data, size) == (ssize_t)size) {
        static struct seen full[MAX_ITEMS];
        size_t nfull = 0;
        walk(fd, size, full, &nfull);
        walk_mem(data, size, full, nfull);
    }
    close(fd);
    if (pulse_damage_decode(data, size, &d, &n) == PULSE_OK && !pulse_damage_valid(d, n))
        abort();
    pulse_free(d);
    return 0;
}
