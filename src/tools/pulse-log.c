/* SPDX-License-Identifier: MIT */
/*
 * pulse-log.c - offline inspection of partition logs: `pulse-log dump` prints
 * the batches and records of a segment file (as text or as one JSON object per
 * record), `pulse-log verify` checks a segment or a whole partition directory
 * (framing, CRCs, offset order, index files) and names the first problem by
 * file and byte position. Formats: docs/Format.md; usage: docs/Tools.md.
 *
 * Design. The tool never opens a log through the storage engine, so it
 * works on a copy of a broken directory without repairing or truncating
 * anything (it opens every file read-only). dump and verify walk segments
 * with the engine's batch iterator (storage/segscan.h), so they name exactly
 * the damaged ranges recovery finds, and verify reads the damage record with
 * its decoder (storage/damage.h). Segments are read one window (or one
 * batch) at a time with pread, so memory is bounded by the largest batch,
 * never by the segment size; a batch length is believed only after it has
 * been checked against the bytes left in the file.
 *
 * Records of a batch whose CRC fails are never printed: the bytes cannot be
 * trusted, and showing them would look like data. The batch header itself is
 * shown (marked crc=BAD) so an operator can see where the damage is.
 *
 * Exit codes: 0 all valid, 1 a problem was found (or a file could not be
 * read), 2 usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/record.h"
#include "common/status.h"
#include "common/text.h"
#include "storage/batch.h"
#include "storage/damage.h"
#include "storage/index.h"
#include "meta/dirfile.h"
#include "meta/meta.h"
#include "common/fsio.h"
#include "storage/segment.h"
#include "storage/segscan.h"
#include "storage/snapshot.h"

#define EXIT_PROBLEM 1
#define EXIT_USAGE 2

/* Segment and index names: 20 decimal digits, then the extension. */
#define NAME_DIGITS 20

/* A batch is at most a header plus a 32-bit records section. */
#define BATCH_BUF_MAX ((size_t)PULSE_BATCH_HEADER_SIZE + UINT32_MAX)

/* One segment file opened for reading. */
struct seg_reader {
    const char *path;
    int fd;
    uint64_t size;
};

/* A batch boundary, for checking index entries. */
struct boundary {
    uint64_t pos;
    int64_t base;
};

struct verify_stats {
    unsigned long segments;
    unsigned long batches;
    unsigned long records;
    unsigned long index_entries;
    unsigned long missing_indexes;
    int64_t first_offset; /* -1 until a record is seen */
    int64_t last_offset;
    unsigned long damaged;       /* damaged ranges (valid batches follow) */
    unsigned long tails;         /* damage that runs to the end of a file */
    unsigned long missing;       /* offset ranges without bytes: gaps, and those the damage record lists */
    unsigned long lost_segments; /* index files whose segment file is gone */
    uint64_t damaged_bytes;
};

/* Offsets verify found missing (gaps), so that the damage record's entry
 * for the same offsets is not counted twice. */
struct gaps {
    int64_t (*r)[2];
    size_t n;
    size_t cap;
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: pulse-log dump [--json] FILE.log\n"
               "       pulse-log verify [--contiguous | --not-contiguous] PATH\n"
               "       pulse-log --help | --version\n"
               "\n"
               "  dump      print every batch and record of a segment file\n"
               "            (--json: one JSON object per record and line)\n"
               "  verify    check a segment file or a partition directory: batch\n"
               "            framing, CRCs, offset order and the .index files\n"
               "            (--contiguous: offsets must have no gaps, as in a topic\n"
               "            with cleanup=delete; the default for a directory is what\n"
               "            ../topic.json says, else gaps are allowed)\n"
               "\n"
               "Exit status: 0 valid, 1 a problem was found, 2 usage error.\n");
}

/* pread until n bytes or EOF; returns 0, or an errno value (EIO on EOF). */
static int read_at(int fd, uint8_t *p, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, p + got, n - got, (off_t)(off + got));
        if (r < 0) {
            int err = errno;
            if (err == EINTR)
                continue;
            return err;
        }
        if (r == 0)
            return EIO; /* the file shrank under us */
        got += (size_t)r;
    }
    return 0;
}

static int reader_open(struct seg_reader *rd, const char *path)
{
    struct stat sb;
    memset(rd, 0, sizeof *rd);
    rd->path = path;
    rd->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (rd->fd < 0) {
        int err = errno;
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(err));
        return -1;
    }
    if (fstat(rd->fd, &sb) != 0) {
        int err = errno;
        fprintf(stderr, "%s: cannot stat: %s\n", path, strerror(err));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: not a regular file\n", path);
        return -1;
    }
    rd->size = (uint64_t)sb.st_size;
    return 0;
}

static void reader_close(struct seg_reader *rd)
{
    if (rd->fd >= 0)
        close(rd->fd);
    rd->fd = -1;
}

static void report(const char *path, uint64_t pos, const char *problem)
{
    printf("%s: byte %" PRIu64 ": %s\n", path, pos, problem);
}

/* ---- text output ---- */

/* Prints bytes as a quoted string: text as is, control bytes and (unless the
 * whole string is UTF-8) non-ASCII bytes as \xHH; NULL as null. */
static void print_bytes(const uint8_t *p, uint32_t len)
{
    if (p == NULL) {
        fputs("null", stdout);
        return;
    }
    bool utf8 = pulse_text_utf8_valid(p, len);
    putchar('"');
    for (uint32_t i = 0; i < len; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8))
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_batch_line(const struct pulse_segscan_item *item, bool crc_ok)
{
    const struct pulse_batch_header *h = &item->hdr;
    printf("batch at byte %" PRIu64 ": base_offset=%" PRId64 " records=%" PRIu32 " flags=0x%04x crc=%s"
           " first_timestamp=%" PRId64 " last_timestamp=%" PRId64 " batch_len=%" PRIu32 "\n",
           item->pos, h->base_offset, h->record_count, h->flags, crc_ok ? "ok" : "BAD", h->first_timestamp,
           h->last_timestamp, h->batch_len);
    /* The producer fields, when a writer set them (an idempotent publish:
     * docs/Format.md "Producer fields"); on their own line so that the
     * batch line keeps its shape. */
    if (h->producer_id != 0 || h->producer_epoch != 0 || h->base_sequence != 0)
        printf("  producer_id=0x%08" PRIx32 " producer_epoch=0x%08" PRIx32 " base_sequence=%" PRId32 "\n",
               h->producer_id, h->producer_epoch, h->base_sequence);
}

static void print_records_text(const struct pulse_segscan_item *item, struct pulse_buf *inflated)
{
    struct pulse_batch_iter it;
    struct pulse_record_view rec;
    if (pulse_batch_iter_open(&it, item->batch, (size_t)(item->end - item->pos), inflated) != PULSE_OK)
        return;
    while (pulse_batch_iter_next(&it, &rec) == PULSE_OK) {
        printf("  offset=%" PRId64 " timestamp=%" PRId64 " key=", rec.offset, rec.timestamp);
        print_bytes(rec.key, rec.key_len);
        fputs(" value=", stdout);
        print_bytes(rec.value, rec.value_len);
        fputs(" headers={", stdout);
        size_t pos = 0;
        struct pulse_header_view hv;
        bool first = true;
        while (pulse_record_header_next(&rec, &pos, &hv) == PULSE_OK) {
            if (!first)
                fputs(", ", stdout);
            first = false;
            print_bytes(hv.key, hv.key_len);
            putchar(':');
            print_bytes(hv.value, hv.value_len);
        }
        fputs("}\n", stdout);
    }
}

/* ---- JSON output ---- */

/* One line per record: the fetch API's record object (common/record.h). */
static int print_records_json(const char *path, const struct pulse_segscan_item *item, struct pulse_buf *inflated)
{
    struct pulse_batch_iter it;
    struct pulse_record_view rv;
    struct pulse_buf line;
    int rc = 0;
    if (pulse_batch_iter_open(&it, item->batch, (size_t)(item->end - item->pos), inflated) != PULSE_OK)
        return -1;
    pulse_buf_init(&line, SIZE_MAX);
    while (rc == 0 && pulse_batch_iter_next(&it, &rv) == PULSE_OK) {
        struct pulse_record rec;
        pulse_batch_record_plain(&rv, &rec);
        pulse_buf_reset(&line);
        if (pulse_record_json_append(&line, &rec) != PULSE_OK || pulse_buf_append_u8(&line, '\n') != PULSE_OK) {
            fprintf(stderr, "%s: out of memory\n", path);
            rc = -1;
        } else if (fwrite(line.data, 1, line.len, stdout) != line.len) {
            rc = -1;
        }
    }
    pulse_buf_fini(&line);
    return rc;
}

/* ---- dump ---- */

/*
 * Walks the file with the engine's iterator, offsets unchecked (a dump
 * shows what is there). A damaged batch whose header still held together
 * is shown as a header line (crc=BAD, unless only its record framing is
 * wrong) without its records, and the walk goes on where the recovery rule
 * finds the next valid batch; damage without a usable header, and a torn
 * batch, end the dump.
 */
static int cmd_dump(const char *path, bool json)
{
    struct seg_reader rd;
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    struct pulse_buf inflated; /* a compressed batch's records */
    int rc = 0;

    if (reader_open(&rd, path) != 0) {
        reader_close(&rd);
        return EXIT_PROBLEM;
    }
    pulse_buf_init(&inflated, PULSE_BATCH_INFLATED_MAX);
    pulse_segscan_init(&sc, pulse_io_posix(), rd.fd, path, -1, rd.size, 0, 0, INT64_MAX, PULSE_SEGSCAN_ANY_ORDER);
    for (;;) {
        if (pulse_segscan_next(&sc, &it) != PULSE_OK) {
            fprintf(stderr, "%s: read failed\n", path);
            rc = EXIT_PROBLEM;
            break;
        }
        if (it.kind == PULSE_SEGSCAN_END)
            break;
        if (it.kind == PULSE_SEGSCAN_BATCH) {
            if (json) {
                if (print_records_json(path, &it, &inflated) != 0) {
                    rc = EXIT_PROBLEM;
                    break;
                }
            } else {
                print_batch_line(&it, true);
                print_records_text(&it, &inflated);
            }
            continue;
        }
        /* The problem goes to stderr so --json output stays pure JSON lines. */
        rc = EXIT_PROBLEM;
        if (it.parsed) {
            if (!json)
                print_batch_line(&it, it.crc_ok);
            fprintf(stderr, "%s: byte %" PRIu64 ": %s; records not shown\n", path, it.pos, it.problem);
            continue;
        }
        fprintf(stderr, "%s: byte %" PRIu64 ": %s\n", path, it.pos, it.problem);
        break;
    }
    if (fflush(stdout) != 0)
        rc = EXIT_PROBLEM;
    pulse_segscan_fini(&sc);
    pulse_buf_fini(&inflated);
    reader_close(&rd);
    return rc;
}

/* ---- verify ---- */

/* The base offset a file name "<20 digits>.<ext>" carries (the engine's
 * parser, storage/segment.h), or -1 when the name does not have that
 * shape or the number passes INT64_MAX. */
static int64_t name_base(const char *name, const char *ext)
{
    int64_t base;
    return pulse_segment_parse_file_name(name, ext, &base) ? base : -1;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s != NULL ? s + 1 : path;
}

static int add_boundary(const char *path, struct boundary **bounds, size_t *nbounds, size_t *cap, uint64_t pos,
                        int64_t base)
{
    if (*nbounds == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct boundary *nb = pulse_realloc(*bounds, ncap * sizeof **bounds);
        if (nb == NULL) {
            fprintf(stderr, "%s: out of memory\n", path);
            return -1;
        }
        *bounds = nb;
        *cap = ncap;
    }
    (*bounds)[*nbounds].pos = pos;
    (*bounds)[*nbounds].base = base;
    (*nbounds)++;
    return 0;
}

/* Prints one damaged range found by the iterator (the recovery rule). */
static void report_damage(const char *path, const struct pulse_segscan_item *it, struct verify_stats *stats)
{
    char msg[PULSE_SEGSCAN_PROBLEM_MAX + 200];

    stats->damaged_bytes += it->end - it->pos;
    if (!it->tail) {
        stats->damaged++;
        snprintf(msg, sizeof msg,
                 "%s; damaged range: bytes %" PRIu64 "..%" PRIu64 ", offsets %" PRId64 "..%" PRId64
                 " unreadable; valid batches follow",
                 it->problem, it->pos, it->end, it->from, it->next_base);
    } else {
        stats->tails++;
        snprintf(msg, sizeof msg,
                 "%s; nothing valid follows: bytes %" PRIu64 "..%" PRIu64 " (offsets from %" PRId64
                 ") are a torn tail if the broker died writing them, else damage%s",
                 it->problem, it->pos, it->end, it->from, it->unresolved ? " (search for valid data gave up)" : "");
    }
    report(path, it->pos, msg);
}

/* Reports offsets [from, to) as missing (no bytes hold them) at pos of
 * path, and remembers them. Returns 0, or 1 when out of memory. */
static int note_missing(const char *path, uint64_t pos, int64_t from, int64_t to, const char *why,
                        struct verify_stats *stats, struct gaps *g)
{
    char msg[400];

    if (g->n == g->cap) {
        size_t ncap = g->cap ? g->cap * 2 : 16;
        int64_t(*nr)[2] = pulse_realloc(g->r, ncap * sizeof *nr);
        if (nr == NULL) {
            fprintf(stderr, "%s: out of memory\n", path);
            return 1;
        }
        g->r = nr;
        g->cap = ncap;
    }
    g->r[g->n][0] = from;
    g->r[g->n][1] = to;
    g->n++;
    stats->missing++;
    snprintf(msg, sizeof msg, "offsets %" PRId64 "..%" PRId64 " are missing: %s", from, to, why);
    report(path, pos, msg);
    return 0;
}

/* How a walk of one segment ended. */
struct seg_end {
    int64_t next; /* the offset the next batch would have to start at */
    uint64_t pos; /* the byte where the walk ended */
    bool tail;    /* damage ran to the end of the file */
};

/*
 * Checks every batch of one segment with the iterator recovery uses
 * (storage/segscan.h), so both name the same damage. seg_base is the base
 * offset from the file name (-1 if unknown), next_base that of the
 * following segment (-1 for the last). *prev_last carries the last offset
 * seen across segments. Batch boundaries (and the starts of damaged ranges)
 * are appended to *bounds for the index check. Damage is printed and
 * counted, and the walk goes on after it. With contiguous, a batch that
 * starts above the offset the one before it ended at leaves missing
 * offsets, reported as recovery records them. *end says where the walk
 * ended. Returns 0, or 1 when the file could not be read.
 */
static int verify_segment(const char *path, int64_t seg_base, int64_t next_base, bool contiguous, int64_t *prev_last,
                          struct verify_stats *stats, struct gaps *g, struct boundary **bounds, size_t *nbounds,
                          struct seg_end *end)
{
    struct seg_reader rd;
    struct pulse_segscan sc;
    struct pulse_segscan_item it;
    int64_t expect = *prev_last + 1 > seg_base ? *prev_last + 1 : seg_base;
    size_t cap = 0;
    int rc = 0;

    *nbounds = 0;
    end->tail = false;
    if (reader_open(&rd, path) != 0) {
        reader_close(&rd);
        return 1;
    }
    pulse_segscan_init(&sc, pulse_io_posix(), rd.fd, path, seg_base, rd.size, 0, expect,
                       next_base >= 0 ? next_base : INT64_MAX, 0);
    sc.seen_batch = *prev_last + 1 > seg_base; /* names the rule that was broken */
    for (;;) {
        int64_t before = sc.expect;
        if (pulse_segscan_next(&sc, &it) != PULSE_OK) {
            fprintf(stderr, "%s: read failed\n", path);
            rc = 1;
            break;
        }
        if (it.kind == PULSE_SEGSCAN_END)
            break;
        if (add_boundary(path, bounds, nbounds, &cap, it.pos,
                         it.kind == PULSE_SEGSCAN_BATCH ? it.hdr.base_offset : it.from) != 0) {
            rc = 1;
            break;
        }
        if (it.kind == PULSE_SEGSCAN_DAMAGE) {
            report_damage(path, &it, stats);
            end->tail = it.tail;
            continue;
        }
        if (contiguous && it.hdr.base_offset > before &&
            note_missing(path, it.pos, before, it.hdr.base_offset,
                         "the batch here does not follow on from the one before (a contiguous log)", stats, g) != 0) {
            rc = 1;
            break;
        }
        if (stats->first_offset < 0)
            stats->first_offset = it.hdr.base_offset;
        stats->last_offset = it.last_offset;
        stats->batches++;
        stats->records += it.hdr.record_count;
        *prev_last = it.last_offset;
    }
    end->next = sc.expect;
    end->pos = sc.pos;
    pulse_segscan_fini(&sc);
    reader_close(&rd);
    return rc;
}

static const struct boundary *find_boundary(const struct boundary *b, size_t n, uint64_t pos)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b[mid].pos == pos)
            return &b[mid];
        if (b[mid].pos < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/*
 * Checks an index file against the batch boundaries of its segment (contract
 * section 4): 8-byte entries, strictly increasing, each at a batch boundary
 * whose base offset is seg_base + relativeOffset. A missing index is allowed
 * (recovery rebuilds it) and counted. Returns 0 or 1 like verify_segment.
 */
static int verify_index(const char *path, int64_t seg_base, const struct boundary *bounds, size_t nbounds,
                        struct verify_stats *stats)
{
    int rc = 0;
    int fd = -1;
    uint8_t *data = NULL;
    struct stat sb;
    char msg[320];

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        if (err == ENOENT) {
            stats->missing_indexes++;
            goto out;
        }
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(err));
        rc = 1;
        goto out;
    }
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        fprintf(stderr, "%s: cannot stat: %s\n", path, strerror(err));
        rc = 1;
        goto out;
    }
    size_t size = (size_t)sb.st_size;
    if (size % PULSE_INDEX_ENTRY_SIZE != 0) {
        snprintf(msg, sizeof msg, "index size %zu is not a multiple of %u", size, PULSE_INDEX_ENTRY_SIZE);
        report(path, size - size % PULSE_INDEX_ENTRY_SIZE, msg);
        rc = 1;
        goto out;
    }
    data = pulse_malloc(size);
    if (data == NULL) {
        fprintf(stderr, "%s: out of memory\n", path);
        rc = 1;
        goto out;
    }
    int err = read_at(fd, data, size, 0);
    if (err != 0) {
        fprintf(stderr, "%s: read failed: %s\n", path, strerror(err));
        rc = 1;
        goto out;
    }
    struct pulse_index_entry e, prev = {0, 0};
    for (size_t i = 0; i < size / PULSE_INDEX_ENTRY_SIZE; i++, prev = e) {
        uint64_t at = (uint64_t)i * PULSE_INDEX_ENTRY_SIZE;
        pulse_index_decode_entry(data + at, &e);
        uint32_t rel_off = e.rel_offset, rel_pos = e.rel_pos;
        if (i > 0) {
            uint32_t prev_off = prev.rel_offset, prev_pos = prev.rel_pos;
            if (rel_off <= prev_off || rel_pos <= prev_pos) {
                snprintf(msg, sizeof msg,
                         "index entry %zu (offset +%" PRIu32 ", position %" PRIu32
                         ") does not increase over the previous entry (offset +%" PRIu32 ", position %" PRIu32 ")",
                         i, rel_off, rel_pos, prev_off, prev_pos);
                report(path, at, msg);
                rc = 1;
                goto out;
            }
        }
        const struct boundary *b = find_boundary(bounds, nbounds, rel_pos);
        if (b == NULL) {
            snprintf(msg, sizeof msg, "index entry %zu points at byte %" PRIu32 ", which is not a batch boundary", i,
                     rel_pos);
            report(path, at, msg);
            rc = 1;
            goto out;
        }
        if (seg_base >= 0 && b->base != seg_base + (int64_t)rel_off) {
            snprintf(msg, sizeof msg,
                     "index entry %zu names offset %" PRId64 " but the batch at byte %" PRIu32
                     " starts at offset %" PRId64,
                     i, seg_base + (int64_t)rel_off, rel_pos, b->base);
            report(path, at, msg);
            rc = 1;
            goto out;
        }
        stats->index_entries++;
    }

out:
    pulse_free(data);
    if (fd >= 0)
        close(fd);
    return rc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the segment file names of a partition directory in offset order
 * (the zero-padded names sort like their numbers). */
static int list_segments(const char *dir, char ***names_out, size_t *n_out)
{
    DIR *d = opendir(dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;

    if (d == NULL) {
        int err = errno;
        fprintf(stderr, "%s: cannot open directory: %s\n", dir, strerror(err));
        rc = -1;
        goto out;
    }
    while ((de = readdir(d)) != NULL) {
        if (strlen(de->d_name) != NAME_DIGITS + 4 || strcmp(de->d_name + NAME_DIGITS, ".log") != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **nn = pulse_realloc(names, ncap * sizeof *names);
            if (nn == NULL) {
                rc = -1;
                goto out;
            }
            names = nn;
            cap = ncap;
        }
        names[n] = pulse_strdup(de->d_name);
        if (names[n] == NULL) {
            rc = -1;
            goto out;
        }
        n++;
    }
    if (n > 0)
        qsort(names, n, sizeof *names, cmp_names);

out:
    if (d != NULL)
        closedir(d);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++)
            pulse_free(names[i]);
        pulse_free(names);
        names = NULL;
        n = 0;
    }
    *names_out = names;
    *n_out = n;
    return rc;
}

/* "DIR/NAME", allocated; NULL when out of memory. */
static char *join_path(const char *dir, const char *name)
{
    struct pulse_buf b;
    size_t len;
    pulse_buf_init(&b, 1 << 16);
    if (pulse_buf_printf(&b, "%s/%s", dir, name) != PULSE_OK || pulse_buf_append_u8(&b, 0) != PULSE_OK) {
        pulse_buf_fini(&b);
        return NULL;
    }
    return (char *)pulse_buf_steal(&b, &len);
}

/* The .index path beside a .log path; NULL if path does not end in .log. */
static char *index_path_for(const char *path)
{
    size_t n = strlen(path);
    if (n < 4 || strcmp(path + n - 4, ".log") != 0)
        return NULL;
    char *p = pulse_malloc(n + 3);
    if (p == NULL)
        return NULL;
    memcpy(p, path, n - 4);
    memcpy(p + n - 4, ".index", 7);
    return p;
}

/*
 * Lists what the damage record of a partition directory (written by
 * recovery, storage/damage.h) holds: damaged byte ranges are also found by
 * the scan, so only the offsets it records as missing (no bytes left) are
 * printed here, as problems (unless the walk reported them already, g).
 * Returns 0, or 1 when the record is unreadable.
 */
static int verify_damage_record(const char *dir, struct verify_stats *stats, const struct gaps *g)
{
    struct pulse_damage *d = NULL;
    size_t n = 0;
    char msg[320];
    char *path = join_path(dir, PULSE_DAMAGE_NAME);
    pulse_status_t st = pulse_damage_read(pulse_io_posix(), dir, &d, &n);
    int rc = 0;

    if (st == PULSE_CORRUPT) {
        report(path != NULL ? path : dir, 0, "damage record does not decode (recovery rewrites it at the next start)");
        rc = 1;
    } else if (st != PULSE_OK && st != PULSE_NOT_FOUND) {
        fprintf(stderr, "%s: cannot read: %s\n", path != NULL ? path : dir, pulse_status_message(st));
        rc = 1;
    }
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < g->n && !seen; k++)
            seen = g->r[k][0] < d[i].to && d[i].from < g->r[k][1];
        if (pulse_damage_has_bytes(&d[i]) || d[i].to <= d[i].from || seen)
            continue;
        stats->missing++;
        snprintf(msg, sizeof msg,
                 "offsets %" PRId64 "..%" PRId64 " are missing: recovery proved them handed out but their data "
                 "is gone (segment %020" PRId64 ", byte %" PRIu64 ", found at %" PRId64 " ms)",
                 d[i].from, d[i].to, d[i].seg_base, d[i].pos, d[i].found_ms);
        report(path != NULL ? path : dir, 0, msg);
    }
    pulse_free(d);
    pulse_free(path);
    return rc;
}

/* The last line of verify: "ok" or "damaged", with the counts. */
static void print_summary(const char *path, const struct verify_stats *stats)
{
    bool bad = stats->damaged + stats->tails + stats->missing + stats->lost_segments > 0;

    printf("%s: %s: %lu segment%s, %lu batches, %lu records", path, bad ? "damaged" : "ok", stats->segments,
           stats->segments == 1 ? "" : "s", stats->batches, stats->records);
    if (stats->first_offset >= 0)
        printf(", offsets %" PRId64 "..%" PRId64, stats->first_offset, stats->last_offset);
    printf(", %lu index entr%s", stats->index_entries, stats->index_entries == 1 ? "y" : "ies");
    if (stats->missing_indexes > 0)
        printf(", %lu index file%s missing", stats->missing_indexes, stats->missing_indexes == 1 ? "" : "s");
    if (bad)
        printf(", %lu damaged range%s and %lu damaged tail%s (%" PRIu64 " bytes), %lu missing offset range%s",
               stats->damaged, stats->damaged == 1 ? "" : "s", stats->tails, stats->tails == 1 ? "" : "s",
               stats->damaged_bytes, stats->missing, stats->missing == 1 ? "" : "s");
    if (stats->lost_segments > 0)
        printf(", %lu lost segment file%s", stats->lost_segments, stats->lost_segments == 1 ? "" : "s");
    printf("\n");
}

/*
 * Whether the offsets of the partition directory dir must be contiguous:
 * what the topic's own copy of its definition (dir/../topic.json, written
 * by pulsed beside its partition directories; docs/Storage.md section 9)
 * says: 1 for cleanup=delete, 0 for compact, -1 when there is no such file
 * or it does not verify (then gaps are allowed and said so).
 */
static int topic_contiguous(const char *dir)
{
    char *path = join_path(dir, "../topic.json");
    char buf[PULSE_DIRFILE_MAX + 1];
    struct pulse_meta_topic t;
    char why[200];
    int fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
    int rc = -1;

    if (got > 0 && (size_t)got <= PULSE_DIRFILE_MAX &&
        pulse_dirfile_topic_decode(buf, (size_t)got, &t, why, sizeof why) == PULSE_OK)
        rc = t.cleanup == 0 ? 1 : 0;
    else if (got >= 0)
        fprintf(stderr, "%s: not a valid topic definition; offset gaps are not checked\n", path);
    if (fd >= 0)
        close(fd);
    pulse_free(path);
    return rc;
}

/* True when the sorted segment names hold "<base>.log". */
static bool has_segment(char **names, size_t n, int64_t base)
{
    for (size_t i = 0; i < n; i++)
        if (name_base(names[i], "log") == base)
            return true;
    return false;
}

/* Index files of dir whose segment file is gone: a lost segment (pulsed
 * removes an index before its data, never the other way). Reported with
 * what the index proves was handed out (the engine's own reading,
 * pulse_segment_orphan_claim). Returns 0, or 1 when one cannot be read. */
static int verify_orphans(const char *dir, char **names, size_t n, bool contiguous, struct verify_stats *stats)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char msg[320];
    int rc = 0;

    if (d == NULL)
        return 1;
    while ((de = readdir(d)) != NULL && rc == 0) {
        int64_t base = name_base(de->d_name, "index"), claim = 0;
        if (base < 0 || has_segment(names, n, base))
            continue;
        char *path = join_path(dir, de->d_name);
        if (path == NULL || pulse_segment_orphan_claim(pulse_io_posix(), dir, base, contiguous, &claim) != PULSE_OK) {
            rc = 1;
        } else {
            stats->lost_segments++;
            snprintf(msg, sizeof msg,
                     "index file without its segment file: segment %020" PRId64 " was lost; offsets below %" PRId64
                     " were handed out",
                     base, claim);
            report(path, 0, msg);
        }
        pulse_free(path);
    }
    closedir(d);
    return rc;
}

/* The snapshot's log end against the end of the data: offsets between
 * were visible once (the snapshot only ever records the high watermark). */
static int verify_snapshot_end(const char *dir, const char *last_seg, const struct seg_end *end,
                               struct verify_stats *stats, struct gaps *g)
{
    struct pulse_snapshot snap;
    char why[200];

    if (pulse_snapshot_read(pulse_io_posix(), dir, &snap) != PULSE_OK || snap.leo <= end->next)
        return 0;
    snprintf(why, sizeof why, "the snapshot says the log ended at %" PRId64 " but the data ends at %" PRId64, snap.leo,
             end->next);
    return note_missing(last_seg, end->pos, end->next, snap.leo, why, stats, g);
}

/* verify of a partition directory. Returns 0, or EXIT_PROBLEM when a file
 * could not be read or is badly named. */
static int verify_dir(const char *path, bool contiguous, struct verify_stats *stats, struct gaps *g)
{
    char **names = NULL;
    size_t nnames = 0;
    char *seg_path = NULL, *idx_path = NULL;
    struct boundary *bounds = NULL;
    size_t nbounds = 0;
    int64_t prev_last = -1;
    struct seg_end end = {-1, 0, false};
    char why[200];
    int rc = 0;

    if (list_segments(path, &names, &nnames) != 0)
        return EXIT_PROBLEM;
    for (size_t i = 0; i < nnames && rc == 0; i++) {
        int64_t base = name_base(names[i], "log");
        int64_t next = i + 1 < nnames ? name_base(names[i + 1], "log") : -1;
        pulse_free(seg_path);
        pulse_free(idx_path);
        seg_path = join_path(path, names[i]);
        idx_path = seg_path != NULL ? index_path_for(seg_path) : NULL;
        if (seg_path == NULL || idx_path == NULL) {
            fprintf(stderr, "pulse-log: out of memory\n");
            rc = EXIT_PROBLEM;
        } else if (base < 0) {
            report(seg_path, 0, "segment name is not a base offset within int64");
            rc = EXIT_PROBLEM;
        } else if (verify_segment(seg_path, base, next, contiguous, &prev_last, stats, g, &bounds, &nbounds, &end) !=
                       0 ||
                   verify_index(idx_path, base, bounds, nbounds, stats) != 0) {
            rc = EXIT_PROBLEM;
        } else {
            stats->segments++;
            /* A segment that ends before the next one starts lost offsets
             * (deleted, or cut at a batch boundary); a damaged tail covers
             * its offsets up to the next base already. */
            snprintf(why, sizeof why, "segment %s ends there but the next one starts at %" PRId64, names[i], next);
            if (contiguous && next >= 0 && !end.tail && end.next < next &&
                note_missing(seg_path, end.pos, end.next, next, why, stats, g) != 0)
                rc = EXIT_PROBLEM;
        }
    }
    if (rc == 0 && nnames > 0 && !end.tail && verify_snapshot_end(path, seg_path, &end, stats, g) != 0)
        rc = EXIT_PROBLEM;
    if (rc == 0 && verify_orphans(path, names, nnames, contiguous, stats) != 0)
        rc = EXIT_PROBLEM;
    if (rc == 0 && verify_damage_record(path, stats, g) != 0)
        rc = EXIT_PROBLEM;
    for (size_t i = 0; i < nnames; i++)
        pulse_free(names[i]);
    pulse_free(names);
    pulse_free(seg_path);
    pulse_free(idx_path);
    pulse_free(bounds);
    return rc;
}

/* contiguous_opt: 1 / 0 from the command line, -1 to ask ../topic.json. */
static int cmd_verify(const char *path, int contiguous_opt)
{
    struct verify_stats stats = {0, 0, 0, 0, 0, -1, -1, 0, 0, 0, 0, 0};
    struct gaps g = {NULL, 0, 0};
    struct stat sb;
    char *idx_path = NULL;
    struct boundary *bounds = NULL;
    size_t nbounds = 0;
    int64_t prev_last = -1;
    struct seg_end end;
    int rc = 0;

    if (stat(path, &sb) != 0) {
        int err = errno;
        fprintf(stderr, "pulse-log: %s: %s\n", path, strerror(err));
        rc = EXIT_USAGE;
        goto out;
    }
    if (S_ISDIR(sb.st_mode)) {
        int contiguous = contiguous_opt >= 0 ? contiguous_opt : topic_contiguous(path);
        rc = verify_dir(path, contiguous == 1, &stats, &g);
        if (rc != 0)
            goto out;
    } else if (S_ISREG(sb.st_mode)) {
        /* A lone segment: its base comes from its name when it has the
         * canonical shape; otherwise offsets are only checked for order. */
        int64_t base = name_base(base_name(path), "log");
        idx_path = index_path_for(path);
        if (verify_segment(path, base, -1, contiguous_opt == 1, &prev_last, &stats, &g, &bounds, &nbounds, &end) != 0 ||
            (idx_path != NULL && verify_index(idx_path, base, bounds, nbounds, &stats) != 0)) {
            rc = EXIT_PROBLEM;
            goto out;
        }
        stats.segments++;
    } else {
        fprintf(stderr, "pulse-log: %s: not a segment file or a directory\n", path);
        rc = EXIT_USAGE;
        goto out;
    }

    print_summary(path, &stats);
    if (stats.damaged + stats.tails + stats.missing + stats.lost_segments > 0)
        rc = EXIT_PROBLEM;

out:
    pulse_free(idx_path);
    pulse_free(bounds);
    pulse_free(g.r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("pulse-log (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "dump") == 0) {
        bool json = false;
        const char *file = NULL;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--json") == 0) {
                json = true;
            } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
                fprintf(stderr, "pulse-log: unknown option %s\n", argv[i]);
                usage(stderr);
                return EXIT_USAGE;
            } else if (file == NULL) {
                file = argv[i];
            } else {
                usage(stderr);
                return EXIT_USAGE;
            }
        }
        if (file == NULL) {
            usage(stderr);
            return EXIT_USAGE;
        }
        return cmd_dump(file, json);
    }
    if (strcmp(cmd, "verify") == 0) {
        int contiguous = -1;
        const char *target = NULL;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--contiguous") == 0) {
                contiguous = 1;
            } else if (strcmp(argv[i], "--not-contiguous") == 0) {
                contiguous = 0;
            } else if (argv[i][0] == '-' || target != NULL) {
                usage(stderr);
                return EXIT_USAGE;
            } else {
                target = argv[i];
            }
        }
        if (target == NULL) {
            usage(stderr);
            return EXIT_USAGE;
        }
        return cmd_verify(target, contiguous);
    }
    fprintf(stderr, "pulse-log: unknown command %s\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
