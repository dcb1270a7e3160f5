/* SPDX-License-Identifier: MIT */
/* status.c - name and message tables generated from PULSE_STATUS_MAP. */
#include "common/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

static const char *const names[] = {
#define PULSE_STATUS_NAME(name, msg) #name,
    PULSE_STATUS_MAP(PULSE_STATUS_NAME)
#undef PULSE_STATUS_NAME
};

static const char *const messages[] = {
#define PULSE_STATUS_MSG(name, msg) msg,
    PULSE_STATUS_MAP(PULSE_STATUS_MSG)
#undef PULSE_STATUS_MSG
};

const char *pulse_status_name(pulse_status_t st)
{
    if ((unsigned)st >= (unsigned)PULSE_STATUS_COUNT)
        return "UNKNOWN";
    return names[st];
}

const char *pulse_status_message(pulse_status_t st)
{
    if ((unsigned)st >= (unsigned)PULSE_STATUS_COUNT)
        return "unknown status";
    return messages[st];
}

pulse_status_t pulse_status_from_errno(int err)
{
    switch (err) {
    case ENOSPC:
#ifdef EDQUOT
    case EDQUOT:
#endif
        return PULSE_NOSPACE;
    case EMFILE:
    case ENFILE:
        return PULSE_NOFILE;
    case ENOMEM:
        return PULSE_NOMEM;
    case EACCES:
    case EPERM:
        return PULSE_ACCESS;
    default:
        return PULSE_IO;
    }
}

void pulse_errbuf_set(char *errbuf, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (errbuf == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(errbuf, errlen, fmt, ap);
    va_end(ap);
}
