/* SPDX-License-Identifier: MIT */
/*
 * meta_int.h - what meta.c shares with the other files of src/meta (the
 * data-directory files of dirfile.c), so that a topic definition has one
 * JSON codec and an identity one validity rule. Never included outside
 * src/meta except by its unit tests.
 */
#ifndef PULSE_META_META_INT_H
#define PULSE_META_META_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/status.h"

struct pulse_meta_topic;

/* The JSON object of a topic definition (the value of topic/<name>). A new
 * reference, or NULL when out of memory. */
json_t *pulse_meta_topic_to_doc(const struct pulse_meta_topic *t);

/* Reads a topic definition from doc (borrowed; NULL gives PULSE_CORRUPT).
 * Extra members are ignored. PULSE_CORRUPT for a missing, mistyped or
 * out-of-range field (*out may then be partly written). */
pulse_status_t pulse_meta_topic_from_doc(json_t *doc, struct pulse_meta_topic *out);

/* PULSE_META_ID_LEN lower-case hex characters. */
bool pulse_meta_id_valid(const char *val, size_t vlen);

#endif
