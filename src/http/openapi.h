/* SPDX-License-Identifier: MIT */
/*
 * openapi.h - the bytes of api/openapi.yaml, compiled into pulsed at build
 * time (src/http/local.mk generates openapi_data.c) so GET /openapi.yaml
 * serves exactly the file the build saw, with no file lookup at run time.
 */
#ifndef PULSE_HTTP_OPENAPI_H
#define PULSE_HTTP_OPENAPI_H

#include <stddef.h>

extern const unsigned char pulse_openapi_yaml[];
extern const size_t pulse_openapi_yaml_len;

#endif
