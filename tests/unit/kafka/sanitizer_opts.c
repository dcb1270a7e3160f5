/* SPDX-License-Identifier: MIT */
/*
 * sanitizer_opts.c - the AddressSanitizer settings of the Kafka unit
 * tests (read by the sanitizer runtime at start; unused in other builds).
 *
 * librdkafka 2.0.2 now and then leaves a cycle of its own objects
 * unreachable when a consumer is closed while every broker is down (a
 * partition object and its topic, 1,048 and 1,000 bytes: only "indirect"
 * leaks, none of Pulse's allocations). Leaks allocated inside librdkafka
 * are not reported; every other leak still fails the test. Allocation
 * stacks are unwound the slow way so that they reach through librdkafka,
 * which is built without frame pointers.
 */
const char *__asan_default_options(void);
const char *__lsan_default_suppressions(void);

const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}

const char *__lsan_default_suppressions(void)
{
    return "leak:librdkafka.so.1\n";
}
