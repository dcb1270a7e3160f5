/* SPDX-License-Identifier: MIT */
/*
 * fetch_json.c - see fetch_json.h. The plan and the stream walk the same
 * source, rewound in between, so they see the same records in the same
 * order; the stream checks that it wrote exactly the planned length and
 * fails the answer otherwise (a bug, never data).
 */
#include "http/fetch_json.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/debug.h"
#include "common/record.h"

enum phase { PH_HEAD, PH_RECORDS, PH_TAIL, PH_DONE };

/* Most bytes of the text after the records: "]", the members after them
 * and "}\n". */
#define TAIL_MAX (PULSE_FETCHJSON_AFTER_MAX + 3)

struct pulse_fetchjson {
    /* limits */
    uint64_t max_records;
    uint64_t max_bytes;
    /* plan */
    uint64_t n_records;   /* records in the answer */
    uint64_t records_len; /* their text and the commas between them */
    size_t max_headers;   /* largest rendered headers among them */
    uint64_t payload;     /* their key and value bytes */
    int64_t next;         /* offset after the last of them */
    bool full;
    /* render: text holds a gap of PULSE_FETCHJSON_ENVELOPE_MAX bytes, then
     * the text of every record planned so far, while rendering */
    bool rendering;
    pulse_fetchjson_grow_fn grow;
    void *grow_arg;
    size_t render_cap;
    struct pulse_buf text;
    const uint8_t *body; /* the whole body in text, once finish found it rendered */
    /* stream */
    struct pulse_fetchjson_source src; /* owned once finish took it */
    bool owns_src;
    char *head; /* envelope before the records */
    size_t head_len;
    char *after; /* members after "records" (owned; nullable) */
    char *tail;  /* and the text after the records (owned) */
    size_t tail_len;
    uint64_t body_len;
    uint64_t written;
    enum phase phase;
    size_t at;        /* progress in head or tail */
    uint64_t emitted; /* records begun */
    bool in_record;
    bool comma; /* a comma is owed before the record */
    struct pulse_record_json w;
};

/* ---- plan ------------------------------------------------------------- */

pulse_status_t pulse_fetchjson_create(int64_t start, uint64_t max_records, uint64_t max_bytes,
                                      struct pulse_fetchjson **out)
{
    struct pulse_fetchjson *fj = pulse_calloc(1, sizeof *fj);
    if (fj == NULL)
        return PULSE_NOMEM;
    fj->max_records = max_records;
    fj->max_bytes = max_bytes;
    fj->next = start;
    pulse_buf_init(&fj->text, 0);
    *out = fj;
    return PULSE_OK;
}

void pulse_fetchjson_destroy(void *arg)
{
    struct pulse_fetchjson *fj = arg;
    if (fj == NULL)
        return;
    if (fj->in_record)
        pulse_record_json_end(&fj->w);
    if (fj->owns_src)
        fj->src.release(fj->src.arg);
    pulse_free(fj->head);
    pulse_free(fj->after);
    pulse_free(fj->tail);
    pulse_buf_fini(&fj->text);
    pulse_free(fj);
}

/* Gives up rendering: the stream writes the records instead. */
static void stop_rendering(struct pulse_fetchjson *fj)
{
    fj->rendering = false;
    pulse_buf_fini(&fj->text);
    pulse_buf_init(&fj->text, 0);
}

/* Appends the record w was begun for (len bytes of text, after a comma
 * when comma) to the rendered text, keeping room for the tail; stops
 * rendering when the text may not grow that far. */
static void render_record(struct pulse_fetchjson *fj, struct pulse_record_json *w, size_t len, bool comma)
{
    size_t need = (comma ? 1 : 0) + len;
    if (need > SIZE_MAX - TAIL_MAX || fj->grow(fj->grow_arg, &fj->text, need + TAIL_MAX, fj->render_cap) != PULSE_OK ||
        pulse_buf_reserve(&fj->text, need + TAIL_MAX) != PULSE_OK) {
        stop_rendering(fj);
        return;
    }
    uint8_t *out = fj->text.data + fj->text.len;
    if (comma)
        *out++ = ',';
    bool done = false;
    size_t n = pulse_record_json_write(w, out, len, &done);
    PULSE_ASSERT(done && n == len); /* measured by begin */
    fj->text.len += need;
}

/* Takes rec into the answer if the limits allow (rendering its text while
 * the plan renders); sets full when they are met. */
static pulse_status_t plan_record(struct pulse_fetchjson *fj, const struct pulse_record *rec)
{
    if (fj->n_records >= fj->max_records) {
        fj->full = true;
        return PULSE_OK;
    }
    size_t len = 0;
    size_t headers = 0;
    struct pulse_record_json w;
    bool render = fj->rendering;
    pulse_status_t st = render ? pulse_record_json_begin(&w, rec) : pulse_record_json_size(rec, &len, &headers);
    if (render && st == PULSE_OK)
        len = pulse_record_json_len(&w, &headers);
    uint64_t with = fj->records_len + (fj->n_records > 0 ? 1 : 0) + len;
    if (st != PULSE_OK)
        goto out;
    /* Stop before the record that would pass max_bytes; the first record
     * is always taken, so a reader always makes progress. */
    if (fj->n_records > 0 && with > fj->max_bytes) {
        fj->full = true;
        goto out;
    }
    if (render)
        render_record(fj, &w, len, fj->n_records > 0);
    fj->records_len = with;
    fj->n_records++;
    fj->next = rec->offset + 1;
    fj->payload += (rec->key != NULL ? rec->key_len : 0) + (rec->value != NULL ? rec->value_len : 0);
    if (headers > fj->max_headers)
        fj->max_headers = headers;
out:
    if (render)
        pulse_record_json_end(&w);
    return st;
}

void pulse_fetchjson_render(struct pulse_fetchjson *fj, pulse_fetchjson_grow_fn grow, void *arg, size_t cap,
                            size_t hint)
{
    size_t first = PULSE_FETCHJSON_ENVELOPE_MAX + TAIL_MAX;
    if (fj->n_records > 0 || fj->rendering)
        return;
    fj->grow = grow;
    fj->grow_arg = arg;
    fj->render_cap = cap;
    fj->rendering = true;
    /* The gap the envelope goes into, room for the tail, and for hint
     * bytes of records at once (each doubling on the way copies it all). */
    first += hint < cap - first ? hint : cap - first;
    if (cap < first || grow(arg, &fj->text, first, cap) != PULSE_OK ||
        pulse_buf_reserve(&fj->text, first) != PULSE_OK) {
        stop_rendering(fj);
        return;
    }
    fj->text.len = PULSE_FETCHJSON_ENVELOPE_MAX;
}

bool pulse_fetchjson_rendered(const struct pulse_fetchjson *fj)
{
    return fj->rendering;
}

pulse_status_t pulse_fetchjson_plan(struct pulse_fetchjson *fj, const struct pulse_fetchjson_source *src)
{
    struct pulse_record rec;
    while (!fj->full && src->next(src->arg, &rec) == PULSE_OK) {
        pulse_status_t st = plan_record(fj, &rec);
        if (st != PULSE_OK)
            return st;
    }
    return PULSE_OK;
}

bool pulse_fetchjson_full(const struct pulse_fetchjson *fj)
{
    return fj->full;
}

uint64_t pulse_fetchjson_records(const struct pulse_fetchjson *fj)
{
    return fj->n_records;
}

int64_t pulse_fetchjson_next(const struct pulse_fetchjson *fj)
{
    return fj->next;
}

size_t pulse_fetchjson_max_headers(const struct pulse_fetchjson *fj)
{
    return fj->max_headers;
}

uint64_t pulse_fetchjson_payload_bytes(const struct pulse_fetchjson *fj)
{
    return fj->payload;
}

/* ---- envelope --------------------------------------------------------- */

/* The members around "records", in the order the API has them. A new
 * member goes here (before "records" in head, or after "]" in tail), and
 * PULSE_FETCHJSON_ENVELOPE_MAX must still bound the result. */
static pulse_status_t envelope_text(struct pulse_fetchjson *fj, const struct pulse_fetchjson_envelope *env)
{
    struct pulse_buf head;
    pulse_buf_init(&head, PULSE_FETCHJSON_ENVELOPE_MAX);
    pulse_status_t st = pulse_buf_printf(&head,
                                         "{\"topic\":\"%s\",\"partition\":%u,\"log_start_offset\":%lld,"
                                         "\"high_watermark\":%lld,\"next_offset\":%lld,\"records\":[",
                                         env->topic, (unsigned)env->partition, (long long)env->log_start,
                                         (long long)env->high_watermark, (long long)env->next_offset);
    if (st != PULSE_OK) {
        pulse_buf_fini(&head);
        return st;
    }
    fj->head = (char *)pulse_buf_steal(&head, &fj->head_len);
    struct pulse_buf tail;
    pulse_buf_init(&tail, PULSE_FETCHJSON_AFTER_MAX + 4);
    st = pulse_buf_printf(&tail, "]%s}\n", fj->after != NULL ? fj->after : "");
    if (st != PULSE_OK) {
        pulse_buf_fini(&tail);
        return st;
    }
    fj->tail = (char *)pulse_buf_steal(&tail, &fj->tail_len);
    return PULSE_OK;
}

pulse_status_t pulse_fetchjson_after_records(struct pulse_fetchjson *fj, const char *json)
{
    if (strlen(json) > PULSE_FETCHJSON_AFTER_MAX)
        return PULSE_TOO_LARGE;
    pulse_free(fj->after);
    fj->after = json[0] != '\0' ? pulse_strdup(json) : NULL;
    return json[0] != '\0' && fj->after == NULL ? PULSE_NOMEM : PULSE_OK;
}

pulse_status_t pulse_fetchjson_finish(struct pulse_fetchjson *fj, const struct pulse_fetchjson_source *src,
                                      const struct pulse_fetchjson_envelope *env, uint64_t *body_len)
{
    pulse_status_t st = envelope_text(fj, env);
    if (st != PULSE_OK)
        return st;
    fj->body_len = fj->head_len + fj->records_len + fj->tail_len;
    *body_len = fj->body_len;
    if (fj->rendering) {
        /* The envelope ends where the records begin; the tail follows
         * them (its room was kept). The records' bytes are no longer
         * needed. */
        PULSE_ASSERT(fj->head_len <= PULSE_FETCHJSON_ENVELOPE_MAX && fj->tail_len <= TAIL_MAX &&
                     fj->text.len == PULSE_FETCHJSON_ENVELOPE_MAX + fj->records_len);
        uint8_t *start = fj->text.data + PULSE_FETCHJSON_ENVELOPE_MAX - fj->head_len;
        memcpy(start, fj->head, fj->head_len);
        memcpy(fj->text.data + fj->text.len, fj->tail, fj->tail_len);
        fj->text.len += fj->tail_len;
        fj->body = start;
        src->release(src->arg);
        return PULSE_OK;
    }
    /* Nothing fails from here: the source changes hands. */
    fj->src = *src;
    fj->owns_src = true;
    fj->src.rewind(fj->src.arg);
    fj->phase = PH_HEAD;
    return PULSE_OK;
}

/* ---- stream ----------------------------------------------------------- */

static size_t copy_text(const char *text, size_t len, size_t *at, uint8_t *out, size_t room)
{
    size_t k = len - *at < room ? len - *at : room;
    memcpy(out, text + *at, k);
    *at += k;
    return k;
}

/* Starts the next planned record; false when the records end first. */
static bool begin_record(struct pulse_fetchjson *fj)
{
    struct pulse_record rec;
    if (fj->src.next(fj->src.arg, &rec) != PULSE_OK)
        return false;
    fj->comma = fj->emitted > 0;
    fj->emitted++;
    fj->in_record = true;
    return pulse_record_json_begin(&fj->w, &rec) == PULSE_OK;
}

/* Record text into out; returns bytes, or -2. */
static ssize_t write_records(struct pulse_fetchjson *fj, uint8_t *out, size_t room)
{
    size_t o = 0;
    while (o < room) {
        if (!fj->in_record) {
            if (fj->emitted == fj->n_records) {
                fj->phase = PH_TAIL;
                break;
            }
            if (!begin_record(fj))
                return -2;
        }
        if (fj->comma) {
            out[o++] = ',';
            fj->comma = false;
            continue;
        }
        bool done = false;
        size_t n = pulse_record_json_write(&fj->w, out + o, room - o, &done);
        o += n;
        if (done) {
            pulse_record_json_end(&fj->w);
            fj->in_record = false;
        } else if (n == 0) {
            break; /* too little room left for the next unit */
        }
    }
    return (ssize_t)o;
}

const uint8_t *pulse_fetchjson_body(const struct pulse_fetchjson *fj)
{
    return fj->body;
}

ssize_t pulse_fetchjson_read(struct pulse_fetchjson *fj, uint8_t *out, size_t room)
{
    size_t o = 0;
    if (fj->body != NULL) {
        if (fj->at == fj->body_len)
            return -1;
        return (ssize_t)copy_text((const char *)fj->body, (size_t)fj->body_len, &fj->at, out, room);
    }
    while (o < room && fj->phase != PH_DONE) {
        if (fj->phase == PH_HEAD) {
            o += copy_text(fj->head, fj->head_len, &fj->at, out + o, room - o);
            if (fj->at == fj->head_len) {
                fj->phase = PH_RECORDS;
                fj->at = 0;
            }
        } else if (fj->phase == PH_RECORDS) {
            ssize_t n = write_records(fj, out + o, room - o);
            if (n < 0)
                return n;
            o += (size_t)n;
            if (fj->phase == PH_RECORDS && n == 0)
                break;
        } else {
            o += copy_text(fj->tail, fj->tail_len, &fj->at, out + o, room - o);
            if (fj->at == fj->tail_len)
                fj->phase = PH_DONE;
        }
    }
    fj->written += o;
    if (fj->written > fj->body_len || (fj->phase == PH_DONE && fj->written != fj->body_len))
        return -2; /* the stream does not match the plan */
    if (o == 0)
        return fj->phase == PH_DONE ? -1 : -2;
    return (ssize_t)o;
}
