/* SPDX-License-Identifier: MIT */
/*
 * local.c - the local backend's table of the seam's functions (backend.h).
 * pulse_broker_open (broker.c) puts it into every broker it opens; each
 * entry is implemented in the file that owns its concern (broker.c,
 * topic.c, publish.c, fetch.c, cursor.c, groups.c) and documented in broker.h, with
 * what this backend does noted there and in docs/Architecture.md
 * section 10.
 */
#include "broker/broker_int.h"

const struct pulse_broker_ops pulse_local_ops = {
    .name = "local",
    .drain = pulse_local_drain,
    .close = pulse_local_close,
    .cluster_id = pulse_local_cluster_id,
    .broker_id = pulse_local_broker_id,
    .started_at_ms = pulse_local_started_at_ms,
    .topic_create_async = pulse_local_topic_create_async,
    .topic_get = pulse_local_topic_get,
    .topic_list = pulse_local_topic_list,
    .topic_set_retention_async = pulse_local_topic_set_retention_async,
    .topic_delete_async = pulse_local_topic_delete_async,
    .publish = pulse_local_publish,
    .fetch_create = pulse_local_fetch_create,
    .fetch_read = pulse_local_fetch_read,
    .fetch_next = pulse_local_fetch_next,
    .fetch_rewind = pulse_local_fetch_rewind,
    .fetch_destroy = pulse_local_fetch_destroy,
    .fetch_probe = pulse_local_fetch_probe,
    .fetch_raw = pulse_local_fetch_raw,
    .note_fetched = pulse_local_note_fetched,
    .offset_for_time = pulse_local_offset_for_time,
    .wait_any = pulse_local_wait_any,
    .cursor_commit_async = pulse_local_cursor_commit_async,
    .cursor_get_async = pulse_local_cursor_get_async,
    .cursor_list_async = pulse_local_cursor_list_async,
    .consumer_list_async = pulse_local_consumer_list_async,
    .consumer_delete_async = pulse_local_consumer_delete_async,
    .metrics = pulse_local_metrics,
    .metrics_per_topic = pulse_local_metrics_per_topic,
    .fenced_list = pulse_local_fenced_list,
    .group_join = pulse_local_group_join,
    .group_heartbeat = pulse_local_group_heartbeat,
    .group_leave = pulse_local_group_leave,
    .group_poll_async = pulse_local_group_poll_async,
    .group_fetched = pulse_local_group_fetched,
    .group_wait = pulse_local_group_wait,
    .group_commit_async = pulse_local_group_commit_async,
    .group_list = pulse_local_group_list,
    .group_describe_async = pulse_local_group_describe_async,
    .publish_idem = pulse_local_publish_idem,
    .note_clients = pulse_local_note_clients,
    .topic_change_async = pulse_local_topic_change_async,
};
