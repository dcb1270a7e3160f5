/* SPDX-License-Identifier: MIT */
/*
 * record.c - see record.h.
 *
 * Method: a record's text is a fixed sequence of pieces; each is literal
 * text, bytes to escape as a JSON string body, or bytes to encode as
 * base64:
 *
 *   {"offset":N,"timestamp":T  ,"key":null | ,"key":"<esc>" | ,"key_base64":"<b64>"
 *   (the same for value)  ,"headers":  {} | <rendered header object>  }
 *
 * The size is the sum of the pieces' lengths; the streamed write walks the
 * same pieces, so the two cannot disagree. The header object is the one
 * piece that needs memory: a name may repeat, and a repeated name keeps its
 * first place with its last value (jansson's object semantics, which the
 * API's text has always followed), so the headers are collected into a
 * table first (names hashed once there are many) and then rendered whole.
 * Records usually have no headers or a few, so that costs nothing on the
 * common path.
 */
#include "common/record.h"

#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/debug.h"

/* ---- the header object ------------------------------------------------- */

/* A header as it will be written: the last value of its name, and the
 * lengths of both as text. */
struct hentry {
    const uint8_t *key;
    size_t key_len;
    size_t key_text_len;  /* escaped */
    const uint8_t *value; /* NULL: null */
    size_t value_len;
    size_t value_text_len; /* escaped or base64 */
    bool value_text;       /* UTF-8: a string; else base64 */
};

/* Up to this many names a linear search finds repeats; past it a hash. */
#define HEADERS_LINEAR 16

struct hset {
    struct hentry *e; /* inline_e, or allocated past HEADERS_LINEAR */
    size_t n;
    uint32_t *slot; /* index + 1 into e, 0 = free; NULL while linear */
    size_t mask;
    struct hentry inline_e[HEADERS_LINEAR];
};

static uint64_t name_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool same_name(const struct hentry *e, const struct pulse_header *h)
{
    return e->key_len == h->key_len && memcmp(e->key, h->key, h->key_len) == 0;
}

/* The entry holding h's name, or NULL (and *slot_out the free hash slot). */
static struct hentry *hset_find(const struct hset *s, const struct pulse_header *h, size_t *slot_out)
{
    if (s->slot == NULL) {
        for (size_t i = 0; i < s->n; i++)
            if (same_name(&s->e[i], h))
                return &s->e[i];
        return NULL;
    }
    size_t i = (size_t)name_hash(h->key, h->key_len) & s->mask;
    while (s->slot[i] != 0) {
        if (same_name(&s->e[s->slot[i] - 1], h))
            return &s->e[s->slot[i] - 1];
        i = (i + 1) & s->mask;
    }
    *slot_out = i;
    return NULL;
}

/* A name that is empty, holds a NUL or is not UTF-8 cannot be a member
 * name (jansson refuses it): left out. */
static bool name_usable(const struct pulse_header *h, size_t *text_len)
{
    return h->key_len > 0 && memchr(h->key, 0, h->key_len) == NULL &&
           pulse_text_json_measure(h->key, h->key_len, text_len);
}

static void hset_fini(struct hset *s)
{
    if (s->e != s->inline_e)
        pulse_free(s->e);
    pulse_free(s->slot);
}

/* Room for cap entries: inline up to HEADERS_LINEAR, else allocated with
 * a hash table. PULSE_NOMEM. */
static pulse_status_t hset_init(struct hset *s, size_t cap)
{
    s->e = s->inline_e;
    s->n = 0;
    s->slot = NULL;
    s->mask = 0;
    if (cap <= HEADERS_LINEAR)
        return PULSE_OK;
    s->e = pulse_calloc(cap, sizeof *s->e);
    if (s->e == NULL) {
        s->e = s->inline_e;
        return PULSE_NOMEM;
    }
    size_t slots = 32;
    while (slots < 2 * cap)
        slots *= 2;
    s->slot = pulse_calloc(slots, sizeof *s->slot);
    if (s->slot == NULL) {
        hset_fini(s);
        s->e = s->inline_e;
        return PULSE_NOMEM;
    }
    s->mask = slots - 1;
    return PULSE_OK;
}

/* Collects rec's headers, names deduplicated. PULSE_NOMEM (then nothing
 * is held). */
static pulse_status_t hset_collect(const struct pulse_record *rec, struct hset *s)
{
    size_t cap = rec->header_count == 0 || rec->header_next == NULL ? 0 : rec->header_count;
    pulse_status_t st = hset_init(s, cap);
    if (st != PULSE_OK || cap == 0)
        return st;
    size_t pos = 0;
    struct pulse_header h;
    while (s->n < cap && rec->header_next(rec, &pos, &h)) {
        size_t name_len = 0;
        if (!name_usable(&h, &name_len))
            continue;
        size_t slot = 0;
        struct hentry *e = hset_find(s, &h, &slot);
        if (e == NULL) {
            e = &s->e[s->n++];
            e->key = h.key;
            e->key_len = h.key_len;
            e->key_text_len = name_len;
            if (s->slot != NULL)
                s->slot[slot] = (uint32_t)s->n;
        }
        e->value = h.value;
        e->value_len = h.value_len;
        e->value_text = h.value != NULL && pulse_text_json_measure(h.value, h.value_len, &e->value_text_len);
        if (h.value != NULL && !e->value_text)
            e->value_text_len = pulse_text_b64_len(h.value_len);
    }
    return PULSE_OK;
}

static size_t hentry_len(const struct hentry *e)
{
    size_t len = 2 + e->key_text_len + 1; /* "name": */
    if (e->value == NULL)
        return len + 4;
    return len + 2 + e->value_text_len;
}

/* {"name":value,...} as jansson's compact dump writes it. */
static size_t hset_text_len(const struct hset *s)
{
    size_t len = 2;
    for (size_t i = 0; i < s->n; i++)
        len += (i > 0) + hentry_len(&s->e[i]);
    return len;
}

static size_t put_escaped(uint8_t *out, const uint8_t *p, size_t n)
{
    size_t at = 0;
    return pulse_text_json_escape_some(p, n, &at, out, SIZE_MAX);
}

static void hset_write(const struct hset *s, uint8_t *out)
{
    size_t o = 0;
    out[o++] = '{';
    for (size_t i = 0; i < s->n; i++) {
        const struct hentry *e = &s->e[i];
        if (i > 0)
            out[o++] = ',';
        out[o++] = '"';
        o += put_escaped(out + o, e->key, e->key_len);
        out[o++] = '"';
        out[o++] = ':';
        if (e->value == NULL) {
            memcpy(out + o, "null", 4);
            o += 4;
            continue;
        }
        out[o++] = '"';
        if (e->value_text) {
            o += put_escaped(out + o, e->value, e->value_len);
        } else {
            size_t at = 0;
            o += pulse_text_b64_encode_some(e->value, e->value_len, &at, out + o, SIZE_MAX);
        }
        out[o++] = '"';
    }
    out[o++] = '}';
}

/* ---- the record's pieces ------------------------------------------------ */

enum part {
    P_OPEN,
    P_KEY_NAME,
    P_KEY_BODY,
    P_KEY_CLOSE,
    P_VALUE_NAME,
    P_VALUE_BODY,
    P_VALUE_CLOSE,
    P_HEADERS_NAME,
    P_HEADERS,
    P_CLOSE,
    P_DONE
};

enum piece_kind { K_TEXT, K_ESCAPED, K_BASE64 };

struct piece {
    enum piece_kind kind;
    const uint8_t *p;
    size_t n;       /* input bytes */
    size_t out_len; /* the text it becomes */
};

#define LIT(s) ((struct piece){K_TEXT, (const uint8_t *)(s), sizeof(s) - 1, sizeof(s) - 1})

/* The member name piece: ,"key":null / ,"key":" / ,"key_base64":" */
static struct piece member_name(bool value, bool null, bool text)
{
    if (null)
        return value ? LIT(",\"value\":null") : LIT(",\"key\":null");
    if (text)
        return value ? LIT(",\"value\":\"") : LIT(",\"key\":\"");
    return value ? LIT(",\"value_base64\":\"") : LIT(",\"key_base64\":\"");
}

static struct piece piece_of(const struct pulse_record_json *w, unsigned part)
{
    const struct pulse_record *rec = &w->rec;
    bool value = part >= P_VALUE_NAME;
    bool null = value ? rec->value == NULL : rec->key == NULL;
    bool text = value ? w->value_text : w->key_text;

    switch ((enum part)part) {
    case P_OPEN:
        return (struct piece){K_TEXT, (const uint8_t *)w->open, w->open_len, w->open_len};
    case P_KEY_NAME:
    case P_VALUE_NAME:
        return member_name(value, null, text);
    case P_KEY_BODY:
    case P_VALUE_BODY:
        if (null)
            return LIT("");
        return (struct piece){text ? K_ESCAPED : K_BASE64, value ? rec->value : rec->key,
                              value ? rec->value_len : rec->key_len, value ? w->value_text_len : w->key_text_len};
    case P_KEY_CLOSE:
    case P_VALUE_CLOSE:
        return null ? LIT("") : LIT("\"");
    case P_HEADERS_NAME:
        return LIT(",\"headers\":");
    case P_HEADERS:
        if (w->headers != NULL)
            return (struct piece){K_TEXT, (const uint8_t *)w->headers, w->headers_len, w->headers_len};
        return LIT("{}");
    case P_CLOSE:
        return LIT("}");
    case P_DONE:
        break;
    }
    return LIT("");
}

/* The text of a key or value: escaped when it is UTF-8, else base64
 * (*text false); 0 for null. */
static size_t bytes_text_len(const uint8_t *p, size_t n, bool *text)
{
    size_t len = 0;
    *text = p != NULL && pulse_text_json_measure(p, n, &len);
    if (p != NULL && !*text)
        len = pulse_text_b64_len(n);
    return len;
}

/* Everything but the rendered headers; no memset: the inline headers
 * need none. */
static void writer_init(struct pulse_record_json *w, const struct pulse_record *rec)
{
    static const char off[] = "{\"offset\":";
    static const char ts[] = ",\"timestamp\":";
    w->rec = *rec;
    w->key_text_len = bytes_text_len(rec->key, rec->key_len, &w->key_text);
    w->value_text_len = bytes_text_len(rec->value, rec->value_len, &w->value_text);
    size_t o = sizeof off - 1;
    memcpy(w->open, off, o);
    o += pulse_text_i64(rec->offset, w->open + o);
    memcpy(w->open + o, ts, sizeof ts - 1);
    o += sizeof ts - 1;
    o += pulse_text_i64(rec->timestamp, w->open + o);
    w->open_len = o;
    w->headers = NULL;
    w->headers_len = 0;
    w->part = P_OPEN;
    w->at = 0;
}

/* The text of the key's or the value's member: its name piece, and its
 * body and closing quote when it is not null. */
static size_t member_len(const struct pulse_record_json *w, bool value)
{
    bool null = value ? w->rec.value == NULL : w->rec.key == NULL;
    size_t name = member_name(value, null, value ? w->value_text : w->key_text).out_len;
    return null ? name : name + (value ? w->value_text_len : w->key_text_len) + 1;
}

/* The sum of every piece's out_len (piece_of), added up directly. */
static size_t writer_total(const struct pulse_record_json *w)
{
    return w->open_len + member_len(w, false) + member_len(w, true) + (sizeof ",\"headers\":" - 1) +
           (w->headers != NULL ? w->headers_len : 2) + 1;
}

/* ---- API ---------------------------------------------------------------- */

pulse_status_t pulse_record_json_size(const struct pulse_record *rec, size_t *len, size_t *headers_len)
{
    struct pulse_record_json w;
    writer_init(&w, rec);
    size_t total = writer_total(&w); /* counts "{}" for the headers */
    size_t hlen = 0;
    if (rec->header_count > 0) {
        struct hset s;
        pulse_status_t st = hset_collect(rec, &s);
        if (st != PULSE_OK)
            return st;
        hlen = hset_text_len(&s);
        hset_fini(&s);
        total = total - 2 + hlen;
    }
    *len = total;
    *headers_len = hlen;
    return PULSE_OK;
}

pulse_status_t pulse_record_json_begin(struct pulse_record_json *w, const struct pulse_record *rec)
{
    writer_init(w, rec);
    if (rec->header_count == 0)
        return PULSE_OK;
    struct hset s;
    pulse_status_t st = hset_collect(rec, &s);
    if (st != PULSE_OK)
        return st;
    size_t len = hset_text_len(&s);
    w->headers = len <= sizeof w->inline_headers ? w->inline_headers : pulse_malloc(len);
    if (w->headers == NULL) {
        hset_fini(&s);
        return PULSE_NOMEM;
    }
    hset_write(&s, (uint8_t *)w->headers);
    w->headers_len = len;
    hset_fini(&s);
    return PULSE_OK;
}

size_t pulse_record_json_len(const struct pulse_record_json *w, size_t *headers_len)
{
    if (headers_len != NULL)
        *headers_len = w->headers != NULL ? w->headers_len : 0;
    return writer_total(w);
}

size_t pulse_record_json_write(struct pulse_record_json *w, uint8_t *out, size_t room, bool *done)
{
    size_t o = 0;
    while (w->part < P_DONE) {
        struct piece pc = piece_of(w, w->part);
        if (pc.kind == K_ESCAPED) {
            o += pulse_text_json_escape_some(pc.p, pc.n, &w->at, out + o, room - o);
        } else if (pc.kind == K_BASE64) {
            o += pulse_text_b64_encode_some(pc.p, pc.n, &w->at, out + o, room - o);
        } else {
            size_t k = pc.n - w->at < room - o ? pc.n - w->at : room - o;
            if (k > 0)
                memcpy(out + o, pc.p + w->at, k);
            w->at += k;
            o += k;
        }
        if (w->at < pc.n)
            break; /* out of room (or too little for the next unit) */
        w->part++;
        w->at = 0;
    }
    *done = w->part == P_DONE;
    return o;
}

void pulse_record_json_end(struct pulse_record_json *w)
{
    if (w->headers != w->inline_headers)
        pulse_free(w->headers);
    w->headers = NULL;
}

pulse_status_t pulse_record_json_append(struct pulse_buf *out, const struct pulse_record *rec)
{
    struct pulse_record_json w;
    pulse_status_t st = pulse_record_json_begin(&w, rec);
    size_t total = st == PULSE_OK ? writer_total(&w) : 0;
    if (st == PULSE_OK)
        st = pulse_buf_reserve(out, total);
    if (st == PULSE_OK) {
        bool done = false;
        size_t n = pulse_record_json_write(&w, out->data + out->len, total, &done);
        PULSE_ASSERT(done && n == total); /* the first pass sized it exactly */
        out->len += n;
    }
    pulse_record_json_end(&w);
    return st;
}
