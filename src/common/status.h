/* SPDX-License-Identifier: MIT */
/*
 * status.h - the one status enum of Pulse.
 *
 * Every fallible function returns pulse_status_t. The list below is the single
 * source of the enum and of its name and message tables (an X-macro, as libuv
 * does with UV_ERRNO_MAP), so the tables cannot drift from the enum. The HTTP
 * layer maps statuses to HTTP codes in one table of its own (http/errmap.c).
 *
 * errno is never part of a status: the code that made the failing syscall logs
 * the call, path and strerror, then maps ENOSPC/EDQUOT to PULSE_NOSPACE,
 * EMFILE/ENFILE to PULSE_NOFILE, EACCES/EPERM to PULSE_ACCESS (so that a
 * caller several layers up still names the cause) and everything else to
 * PULSE_IO.
 */
#ifndef PULSE_COMMON_STATUS_H
#define PULSE_COMMON_STATUS_H

#include <stddef.h>

#define PULSE_STATUS_MAP(X)                                                                                            \
    X(OK, "ok")                                                                                                        \
    X(NOMEM, "out of memory")                                                                                          \
    X(IO, "input/output error")                                                                                        \
    X(NOSPACE, "no space left on the storage device")                                                                  \
    X(CORRUPT, "stored data failed validation")                                                                        \
    X(INVALID, "invalid argument")                                                                                     \
    X(INVALID_NAME, "invalid name")                                                                                    \
    X(NOT_FOUND, "not found")                                                                                          \
    X(TOPIC_NOT_FOUND, "topic not found")                                                                              \
    X(PARTITION_NOT_FOUND, "partition not found")                                                                      \
    X(CURSOR_NOT_FOUND, "cursor not found")                                                                            \
    X(EXISTS, "already exists")                                                                                        \
    X(RANGE, "value out of range")                                                                                     \
    X(TOO_LARGE, "too large")                                                                                          \
    X(BUSY, "resource busy")                                                                                           \
    X(NOFILE, "too many open files: the process reached its descriptor limit (RLIMIT_NOFILE)")                         \
    X(FENCED, "partition fenced after a failed write or sync; it is being reopened, retry later")                      \
    X(SHUTDOWN, "shutting down")                                                                                       \
    X(EOF, "end of data")                                                                                              \
    X(ACCESS, "permission denied")                                                                                     \
    X(NOT_SUPPORTED, "not supported by this backend")                                                                  \
    X(REJOIN, "the group does not know this member (it left, its lease ran out, or the broker restarted): join again") \
    X(GROUP_FENCED, "the member does not own this partition in this generation")                                       \
    X(UNAVAILABLE, "the backend's cluster cannot be reached or did not answer in time; retry later")                   \
    X(KEY_REUSED, "the idempotency key was used for a different request")

/* The list's expansion ends in a comma clang-format cannot see. */
/* clang-format off */
typedef enum {
#define PULSE_STATUS_ENUM(name, msg) PULSE_##name,
    PULSE_STATUS_MAP(PULSE_STATUS_ENUM)
#undef PULSE_STATUS_ENUM
    PULSE_STATUS_COUNT
} pulse_status_t;
/* clang-format on */

/* "PULSE_IO" -> "IO". Never NULL; unknown values give "UNKNOWN". */
const char *pulse_status_name(pulse_status_t st);

/* A short human sentence. Never NULL. */
const char *pulse_status_message(pulse_status_t st);

/* Maps a saved errno of a failed syscall: ENOSPC/EDQUOT -> NOSPACE,
 * EMFILE/ENFILE -> NOFILE, ENOMEM -> NOMEM, EACCES/EPERM -> ACCESS,
 * anything else -> IO. */
pulse_status_t pulse_status_from_errno(int err);

/* Formats a one-line reason into a caller's error buffer (errbuf, errlen),
 * the companion of a failing status in APIs that take one. Does nothing
 * when errbuf is NULL or errlen is 0; always NUL-terminates otherwise. */
void pulse_errbuf_set(char *errbuf, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
