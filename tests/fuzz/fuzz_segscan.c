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
 * aborts. The same bytes are also fed to pulse_damage_decode, whose output,
 * when accepted, must satisfy pulse_damage_valid.
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

static void walk(int fd, size_t size)
{
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    uint64_t pos = 0;
    int64_t expect = 0;
    bool tail = false;

    pulse_segscan_init(&sc, pulse_io_posix(), fd, "fuzz", 0, size, 0, 0, INT64_MAX);
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
    }
    if (pos != size && !tail)
        abort();
    pulse_segscan_fini(&sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pulse_damage *d = NULL;
    size_t n = 0;
    int fd = memfd_create("fuzz-segment", 0);

    if (fd < 0)
        return 0;
    if (size == 0 || write(fd, data, size) == (ssize_t)size)
        walk(fd, size);
    close(fd);
    if (pulse_damage_decode(data, size, &d, &n) == PULSE_OK && !pulse_damage_valid(d, n))
        abort();
    pulse_free(d);
    return 0;
}
