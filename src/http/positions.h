/* SPDX-License-Identifier: MIT */
/*
 * positions.h - positions in a partition as requests name them, and lists
 * of positions over the partitions of a topic (docs/API.md "Positions").
 * The one parser and writer of both, used by fetch, event streams,
 * topic-wide reads and cursor commits.
 *
 * A position is "earliest" (the log start), "latest" (the high watermark:
 * the next record to arrive), a decimal offset, or a time "<ms>ms" (the
 * first record at or after that many milliseconds since the epoch; the
 * high watermark when there is none yet). A list is "P:POS,P:POS,..." with
 * each partition at most once, e.g. "0:12,1:latest,3:1764446400000ms"; the
 * same text is the id of a topic-wide stream's events ("P:OFFSET,...").
 *
 * Thread: any; no state. Resolving asks the broker (does not wait: the
 * index and a few small reads; broker.h).
 */
#ifndef PULSE_HTTP_POSITIONS_H
#define PULSE_HTTP_POSITIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct pulse_broker;

enum pulse_pos_kind { PULSE_POS_OFFSET = 0, PULSE_POS_EARLIEST, PULSE_POS_LATEST, PULSE_POS_TIME };

struct pulse_pos {
    enum pulse_pos_kind kind;
    int64_t value; /* the offset, or the time in ms */
};

/* One partition's position in a list. */
struct pulse_pos_entry {
    uint32_t partition;
    struct pulse_pos pos;
};

/* Longest text pulse_pos_list_format writes for n entries (with its NUL). */
#define PULSE_POS_LIST_TEXT_MAX(n) ((size_t)(n)*32u + 1u)

/* Parses s[0, len): PULSE_OK, or PULSE_INVALID for anything else (a
 * negative offset included). */
pulse_status_t pulse_pos_parse(const char *s, size_t len, struct pulse_pos *out);

/*
 * Parses a list into out (at most cap entries), sorted by partition.
 * PULSE_INVALID with errbuf saying what is wrong: an empty list, an entry
 * that is not P:POS, a partition not below nparts (PULSE_PARTITION_NOT_FOUND
 * then), a partition named twice, more than cap entries.
 */
pulse_status_t pulse_pos_list_parse(const char *s, uint32_t nparts, struct pulse_pos_entry *out, size_t cap,
                                    size_t *n_out, char *errbuf, size_t errlen);

/*
 * The offset a position names in partition p of topic: the log start, the
 * high watermark, the offset itself, or the broker's offset for the time.
 * The errors of pulse_broker_fetch_probe / pulse_broker_offset_for_time.
 * An offset is returned as it is (the read decides whether it is in range).
 */
pulse_status_t pulse_pos_resolve(struct pulse_broker *b, const char *topic, uint32_t p, const struct pulse_pos *pos,
                                 int64_t *offset_out);

/* Writes "P:OFFSET,..." for n partitions and their offsets into out
 * (PULSE_POS_LIST_TEXT_MAX(n) bytes); returns the length. */
size_t pulse_pos_list_format(const uint32_t *parts, const int64_t *offsets, size_t n, char *out, size_t cap);

#endif
