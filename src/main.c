/* SPDX-License-Identifier: MIT */
/*
 * main.c - pulsed: command line, configuration, signals, wiring and exit
 * codes; nothing else.
 *
 * Exit codes: 0 after a clean stop (or a successful --repair-metadata /
 * --adopt-topic / --forget-topic / --recreate-partition); 1 when the broker
 * or the server cannot start (data directory in use or not writable, a full
 * file system, port busy, recovery failed, damaged metadata, missing topic
 * or partition directories), an offline mode failed, or a second signal
 * cut the drain short; 2 for a bad command line or configuration (a
 * --listen value that is not an address and port, a --recreate-partition
 * argument that is not TOPIC/P, included).
 *
 * Signals: SIGINT and SIGTERM are blocked before any thread exists (every
 * thread inherits the mask) and taken by sigwait in the main thread, so no
 * handler runs in async-signal context. The first starts the graceful stop;
 * a watcher thread then waits for a second one and _exits at once (recovery
 * at the next start deals with whatever was not finished). SIGHUP, blocked
 * the same way and taken by the same sigwait, reloads the token file
 * (auth.token-file) and the HTTPS certificate and key (on_sighup) and
 * never stops the process.
 *
 * Two helper modes run before any configuration is read: --hash-token
 * NAME GRANT... (reads a token on stdin, prints its token-file line) and
 * --routes (prints every route and method with the grant it needs).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/local.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "http/auth.h"
#include "http/config.h"
#include "http/router.h"
#include "kafka/kafka.h"
#include "http/server.h"

#define EXIT_CONFIG 2
#define SHUTDOWN_DEADLINE_MS 10000

/* Connections (two descriptors each with a raw fetch) and the segment
 * descriptor cache are sized against the soft limit: raise it to the hard
 * limit; failing that is not fatal, the settings are fitted to the limit
 * (pulse_config_fit_fd_limit). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Lowers the connection limit and the segment cache when the descriptor
 * limit cannot hold them, so accept() and LevelDB always find a
 * descriptor (docs/Operations.md "Descriptor budget"). */
static void fit_fd_limit(struct pulse_config *cfg)
{
    struct rlimit rl;
    char msg[768];
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    if (pulse_config_fit_fd_limit(cfg, (uint64_t)rl.rlim_cur, msg, sizeof msg))
        PULSE_WARN("%s", msg);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: pulsed [-c FILE] [--data-dir DIR] [--listen HOST:PORT] [-o section.key=value]...\n"
               "              [--version] [--help]\n"
               "       pulsed --hash-token NAME [GRANT]...  < token\n"
               "       pulsed --routes\n"
               "       pulsed [-c FILE] [--data-dir DIR] --repair-metadata\n"
               "       pulsed [-c FILE] [--data-dir DIR] --adopt-topic NAME [--partitions N]\n"
               "              [--cleanup delete|compact] [-o topic-defaults.KEY=VALUE]...\n"
               "       pulsed [-c FILE] [--data-dir DIR] --forget-topic NAME\n"
               "       pulsed [-c FILE] [--data-dir DIR] --recreate-partition TOPIC/P [--start-offset N]\n"
               "  -c, --config FILE     read settings from an INI-style file\n"
               "  --data-dir DIR        data directory (server.data-dir, default ./data)\n"
               "  --listen HOST:PORT    listen address (server.listen, default 127.0.0.1:8080)\n"
               "  -o section.key=value  set any setting (repeatable)\n"
               "  --repair-metadata     with pulsed stopped: repair a damaged metadata store (LevelDB's\n"
               "                        repair), rebuild what it lost from the data directory, report, exit\n"
               "  --adopt-topic NAME    with pulsed stopped: write topics/NAME/topic.json for a topic\n"
               "                        directory without metadata, so that the next start adopts it;\n"
               "                        --partitions must match its partition directories, --cleanup\n"
               "                        defaults to delete, retention and segment size come from the\n"
               "                        topic-defaults settings\n"
               "  --forget-topic NAME   with pulsed stopped: remove the metadata and consumer cursors of a\n"
               "                        topic whose directory is missing (a start refuses while the\n"
               "                        metadata names such topics); only for a topic gone for good\n"
               "  --recreate-partition TOPIC/P\n"
               "                        with pulsed stopped: make partition P's missing or empty\n"
               "                        directory again with an empty log (its records are lost) whose\n"
               "                        offsets start after every consumer cursor on it, or at\n"
               "                        --start-offset N if that is higher; only for a log gone for good\n"
               "  --hash-token NAME [GRANT]...\n"
               "                        read a token (one line) on standard input and print its line for\n"
               "                        auth.token-file; grants are read:, write:, admin: or commit:PATTERN;\n"
               "                        rps=N and bps=SIZE give the token its own rate limits\n"
               "  --routes              print every route and method with the grant it needs\n"
               "Precedence: defaults < config file < PULSE_<SECTION>_<KEY> environment < command line.\n"
               "See docs/Configuration.md for every setting, docs/Operations.md for the repair modes.\n");
}

/* What the command line asks for besides serving. */
struct mode {
    bool repair;
    const char *adopt;      /* topic name */
    const char *forget;     /* topic name */
    const char *recreate;   /* TOPIC/P */
    long partitions;        /* -1: not given */
    int cleanup;            /* -1: not given */
    long long start_offset; /* -1: not given */
};

static void *second_signal(void *arg)
{
    sigset_t *set = arg;
    int sig = 0;
    if (sigwait(set, &sig) == 0) {
        static const char msg[] = "pulsed: second signal, exiting immediately\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(1);
    }
    return NULL;
}

/* --partitions and --cleanup of --adopt-topic, --start-offset of
 * --recreate-partition; 0 or EXIT_CONFIG. */
static int parse_mode_arg(int c, const char *arg, struct mode *mode)
{
    char *end = NULL;

    if (c == 'S') {
        errno = 0;
        long long n = strtoll(arg, &end, 10);
        if (end == arg || *end != '\0' || errno != 0 || n < 0 || n > PULSE_BROKER_MAX_START_OFFSET) {
            fprintf(stderr, "pulsed: --start-offset: \"%s\" is not an integer in 0..%lld\n", arg,
                    (long long)PULSE_BROKER_MAX_START_OFFSET);
            return EXIT_CONFIG;
        }
        mode->start_offset = n;
    } else if (c == 'P') {
        long n = strtol(arg, &end, 10);
        if (end == arg || *end != '\0' || n < 1 || n > 256) {
            fprintf(stderr, "pulsed: --partitions: \"%s\" is not an integer in 1..256\n", arg);
            return EXIT_CONFIG;
        }
        mode->partitions = n;
    } else if (strcmp(arg, "delete") == 0) {
        mode->cleanup = PULSE_CLEANUP_DELETE;
    } else if (strcmp(arg, "compact") == 0) {
        mode->cleanup = PULSE_CLEANUP_COMPACT;
    } else {
        fprintf(stderr, "pulsed: --cleanup: \"%s\" is not delete or compact\n", arg);
        return EXIT_CONFIG;
    }
    return 0;
}

/* The offline modes exclude each other, and their options go with them. */
static int check_mode(const struct mode *mode)
{
    if ((mode->repair ? 1 : 0) + (mode->adopt != NULL ? 1 : 0) + (mode->forget != NULL ? 1 : 0) +
            (mode->recreate != NULL ? 1 : 0) >
        1) {
        fprintf(stderr, "pulsed: --repair-metadata, --adopt-topic, --forget-topic and --recreate-partition are "
                        "separate steps; run one, then the other\n");
        return EXIT_CONFIG;
    }
    if (mode->recreate == NULL && mode->start_offset >= 0) {
        fprintf(stderr, "pulsed: --start-offset goes with --recreate-partition\n");
        return EXIT_CONFIG;
    }
    if (mode->adopt == NULL && (mode->partitions >= 0 || mode->cleanup >= 0)) {
        fprintf(stderr, "pulsed: --partitions and --cleanup go with --adopt-topic\n");
        return EXIT_CONFIG;
    }
    return 0;
}

/* Applies command-line settings in order (with apply; -c is read
 * separately first). 0 to go on, -1 after --help or --version, else the
 * exit status. */
static int parse_cli(int argc, char **argv, struct pulse_config *cfg, const char **config_file, struct mode *mode,
                     bool apply)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"data-dir", required_argument, NULL, 'd'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"version", no_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {"repair-metadata", no_argument, NULL, 'R'},
                                         {"adopt-topic", required_argument, NULL, 'A'},
                                         {"partitions", required_argument, NULL, 'P'},
                                         {"cleanup", required_argument, NULL, 'C'},
                                         {"forget-topic", required_argument, NULL, 'F'},
                                         {"recreate-partition", required_argument, NULL, 'N'},
                                         {"start-offset", required_argument, NULL, 'S'},
                                         {NULL, 0, NULL, 0}};
    char err[512];
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:o:hV", opts, NULL)) != -1) {
        pulse_status_t st = PULSE_OK;
        err[0] = '\0';
        switch (c) {
        case 'c':
            *config_file = optarg;
            break;
        case 'd':
            if (apply)
                st = pulse_config_set(cfg, "server.data-dir", optarg, err, sizeof err);
            break;
        case 'l':
            if (apply)
                st = pulse_config_set(cfg, "server.listen", optarg, err, sizeof err);
            break;
        case 'o':
            if (apply)
                st = pulse_config_set_assignment(cfg, optarg, err, sizeof err);
            break;
        case 'R':
            mode->repair = true;
            break;
        case 'A':
            mode->adopt = optarg;
            break;
        case 'F':
            mode->forget = optarg;
            break;
        case 'N':
            mode->recreate = optarg;
            break;
        case 'P':
        case 'C':
        case 'S':
            if (parse_mode_arg(c, optarg, mode) != 0)
                return EXIT_CONFIG;
            break;
        case 'V':
            printf("pulsed %s\n", PACKAGE_VERSION);
            return -1;
        case 'h':
            usage(stdout);
            return -1;
        default:
            usage(stderr);
            return EXIT_CONFIG;
        }
        if (st != PULSE_OK) {
            fprintf(stderr, "pulsed: %s\n", err);
            return EXIT_CONFIG;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "pulsed: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return EXIT_CONFIG;
    }
    return check_mode(mode);
}

/* --repair-metadata: prints what was done; 0 or 1. */
static int run_repair(const struct pulse_broker_config *bcfg)
{
    struct pulse_broker_repair_report rep;
    char err[1024] = "";
    pulse_status_t st;

    printf("pulsed: repairing the metadata store %s/meta\n", bcfg->data_dir);
    st = pulse_broker_repair_metadata(bcfg, &rep, err, sizeof err);
    if (st != PULSE_OK) {
        fprintf(stderr, "pulsed: repair failed: %s\n", err[0] ? err : pulse_status_message(st));
        return 1;
    }
    if (!rep.store_found)
        printf("pulsed: there was no metadata store; a new one was built from the data directory\n");
    else
        printf("pulsed: LevelDB repair: %u unreadable table file(s) set aside in %s/meta/lost (their records are "
               "lost), %u damage report(s)\n",
               rep.tables_set_aside, bcfg->data_dir, rep.damage_lines);
    for (uint32_t i = 0; i < rep.damage_lines && i < PULSE_BROKER_REPAIR_NOTES; i++)
        printf("pulsed:   %s\n", rep.damage[i]);
    printf("pulsed: rebuild: %u topic(s) with %u partition(s); %u adopted from their topic.json; identity %s; "
           "%u unfinished create(s)/delete(s) removed\n",
           rep.open.topics, rep.open.partitions, rep.open.adopted_topics,
           rep.open.identity_restored ? "restored from cluster.json" : "kept", rep.open.deleted_leftovers);
    printf("pulsed: %llu consumer cursor(s) kept; cursors that were in damaged or lost records cannot be "
           "recovered and were not recreated\n",
           (unsigned long long)rep.cursors);
    printf("pulsed: repair done; start pulsed as usual\n");
    return 0;
}

/* --adopt-topic: 0 or 1. */
static int run_adopt(const struct pulse_broker_config *bcfg, const struct mode *mode)
{
    struct pulse_topic_spec spec = {mode->adopt, (int32_t)mode->partitions, mode->cleanup, -1, -1, -1, -1};
    struct pulse_topic_info info;
    char err[1024] = "";
    pulse_status_t st = pulse_broker_adopt_topic(bcfg, &spec, &info, err, sizeof err);

    if (st != PULSE_OK) {
        fprintf(stderr, "pulsed: cannot adopt topic %s: %s\n", mode->adopt, err[0] ? err : pulse_status_message(st));
        return 1;
    }
    printf("pulsed: wrote %s/topics/%s/topic.json: partitions=%u cleanup=%s retention_ms=%lld retention_bytes=%lld "
           "segment_bytes=%lld; the next start adopts the topic\n",
           bcfg->data_dir, info.name, info.partitions, info.cleanup == PULSE_CLEANUP_COMPACT ? "compact" : "delete",
           (long long)info.retention_ms, (long long)info.retention_bytes, (long long)info.segment_bytes);
    return 0;
}

/* --forget-topic: 0 or 1. */
static int run_forget(const struct pulse_broker_config *bcfg, const char *name)
{
    char err[1024] = "";
    size_t cursors = 0;
    pulse_status_t st = pulse_broker_forget_topic(bcfg, name, &cursors, err, sizeof err);

    if (st != PULSE_OK) {
        fprintf(stderr, "pulsed: cannot forget topic %s: %s\n", name, err[0] ? err : pulse_status_message(st));
        return 1;
    }
    printf("pulsed: forgot topic %s: its metadata and %zu consumer cursor(s) were removed; should its directory "
           "come back, the next start adopts it from its topic.json\n",
           name, cursors);
    return 0;
}

/* --recreate-partition TOPIC/P: 0, 1, or EXIT_CONFIG for an argument that
 * is not TOPIC/P. */
static int run_recreate(const struct pulse_broker_config *bcfg, const struct mode *mode)
{
    struct pulse_broker_recreate_report rep;
    const char *slash = strrchr(mode->recreate, '/');
    char topic[256];
    char *end = NULL;
    char err[1024] = "";
    unsigned long p = 0;
    pulse_status_t st;

    if (slash != NULL) {
        errno = 0;
        p = strtoul(slash + 1, &end, 10);
    }
    if (slash == NULL || slash == mode->recreate || (size_t)(slash - mode->recreate) >= sizeof topic ||
        end == slash + 1 || *end != '\0' || errno != 0 || p > 65535 || slash[1] == '-' || slash[1] == '+') {
        fprintf(stderr, "pulsed: --recreate-partition: \"%s\" is not TOPIC/PARTITION (e.g. orders/1)\n",
                mode->recreate);
        return EXIT_CONFIG;
    }
    snprintf(topic, sizeof topic, "%.*s", (int)(slash - mode->recreate), mode->recreate);
    st = pulse_broker_recreate_partition(bcfg, topic, (uint32_t)p, mode->start_offset < 0 ? 0 : mode->start_offset,
                                         &rep, err, sizeof err);
    if (st != PULSE_OK) {
        fprintf(stderr, "pulsed: cannot recreate partition %s: %s\n", mode->recreate,
                err[0] ? err : pulse_status_message(st));
        return 1;
    }
    printf("pulsed: recreated partition %s empty: its records are lost; its %zu consumer cursor(s) are kept "
           "(the highest at %lld); new records get offsets from %lld on\n",
           mode->recreate, rep.cursors, (long long)rep.highest_cursor, (long long)rep.start_offset);
    if (mode->start_offset < 0 || rep.start_offset > mode->start_offset)
        printf("pulsed: offsets from %lld up to where the lost log ended will be handed out again; if you know that "
               "end (the partition's last pulse_partition_high_watermark), remove %s/topics/%s/%lu before starting "
               "pulsed and run this again with --start-offset END\n",
               (long long)rep.start_offset, bcfg->data_dir, topic, p);
    return 0;
}

/* Offline modes: no listener, no serving. The exit status, or -1 when the
 * command line asks for none (serve). */
static int run_offline(const struct pulse_config *cfg, const struct mode *mode)
{
    struct pulse_broker_config bcfg;

    if (!mode->repair && mode->adopt == NULL && mode->forget == NULL && mode->recreate == NULL)
        return -1;
    pulse_broker_config_init(&bcfg);
    pulse_config_to_broker(cfg, &bcfg);
    if (mode->repair)
        return run_repair(&bcfg);
    if (mode->recreate != NULL)
        return run_recreate(&bcfg, mode);
    return mode->adopt != NULL ? run_adopt(&bcfg, mode) : run_forget(&bcfg, mode->forget);
}

/* Settings in precedence order: defaults < config file < environment <
 * command line. -1 to go on; otherwise the exit status (0 after --help or
 * --version). */
static int configure(int argc, char **argv, struct pulse_config *cfg, struct mode *mode)
{
    const char *config_file = NULL;
    char err[512] = "";

    /* Pass 1 finds -c (and handles --help/--version); pass 2 applies the
     * command line after the file and the environment, so it wins. */
    int cli = parse_cli(argc, argv, cfg, &config_file, mode, false);
    if (cli != 0)
        return cli < 0 ? 0 : cli;
    if (config_file != NULL && pulse_config_load_file(cfg, config_file, err, sizeof err) != PULSE_OK) {
        fprintf(stderr, "pulsed: %s\n", err);
        return EXIT_CONFIG;
    }
    if (pulse_config_load_env(cfg, NULL, err, sizeof err) != PULSE_OK) {
        fprintf(stderr, "pulsed: %s\n", err);
        return EXIT_CONFIG;
    }
    cli = parse_cli(argc, argv, cfg, &config_file, mode, true);
    if (cli != 0)
        return cli < 0 ? 0 : cli;
    enum pulse_log_level level = PULSE_LOG_INFO;
    (void)pulse_log_parse_level(cfg->log.level, &level);
    pulse_log_set_level(level);
    fit_fd_limit(cfg);
    return -1;
}

/* Opens the Kafka backend (broker.backend = kafka); 0 or 1 (logged). */
static int open_kafka(const struct pulse_config *cfg, struct pulse_broker **out)
{
    struct pulse_kafka_config kcfg = {.settings = &cfg->kafka,
                                      .max_records_per_publish = (uint32_t)cfg->server.max_records_per_request,
                                      .default_partitions = (uint32_t)cfg->broker.partitions,
                                      .group_lease_min_ms = cfg->broker.group_lease_min_ms,
                                      .group_lease_max_ms = cfg->broker.group_lease_max_ms,
                                      .group_lease_default_ms = cfg->broker.group_lease_default_ms,
                                      .group_max_members = (uint32_t)cfg->broker.group_max_members,
                                      .group_max_groups = (uint32_t)cfg->broker.group_max_groups};
    char err[1024] = "";
    if (pulse_kafka_open(&kcfg, out, err, sizeof err) != PULSE_OK) {
        PULSE_ERROR("cannot start the Kafka backend: %s", err);
        *out = NULL;
        return 1;
    }
    PULSE_INFO("broker backend kafka (cluster %s)", pulse_broker_cluster_id(*out));
    return 0;
}

/* Opens the broker on the configured data directory; 0 or 1 (logged). */
/* "s" unless n is 1: the start's summary says "1 partition", "2 partitions". */
static const char *plural(unsigned long long n)
{
    return n == 1 ? "" : "s";
}

static int open_broker(const struct pulse_config *cfg, struct pulse_broker **out)
{
    struct pulse_broker_config bcfg;
    struct pulse_broker_open_report report;
    char err[1024] = "";
    pulse_status_t st;

    if (strcmp(cfg->broker.backend, "kafka") == 0)
        return open_kafka(cfg, out);
    pulse_broker_config_init(&bcfg);
    pulse_config_to_broker(cfg, &bcfg);
    memset(&report, 0, sizeof report);
    st = pulse_broker_open(&bcfg, out, &report, err, sizeof err);
    if (st != PULSE_OK) {
        if (st == PULSE_BUSY && err[0] == '\0')
            PULSE_ERROR("data directory %s is in use by another process", cfg->server.data_dir);
        else if (st == PULSE_BUSY)
            PULSE_ERROR("%s", err);
        else
            PULSE_ERROR("cannot open data directory %s: %s", cfg->server.data_dir,
                        err[0] ? err : pulse_status_message(st));
        *out = NULL;
        return 1;
    }
    /* The one summary line of a start; the partitions recovery repaired
     * or found damaged have lines of their own before it. */
    PULSE_INFO("recovered %u topic%s, %u partition%s in %.1f ms (%u partition%s repaired or damaged, truncated "
               "%llu torn byte%s, %u corrupt segment%s, %u leftover%s removed)",
               report.topics, plural(report.topics), report.partitions, plural(report.partitions),
               (double)report.recovery_us / 1000.0, report.repaired_partitions, plural(report.repaired_partitions),
               (unsigned long long)report.truncated_bytes, plural(report.truncated_bytes), report.corrupt_segments,
               plural(report.corrupt_segments), report.deleted_leftovers, plural(report.deleted_leftovers));
    return 0;
}

/* SIGHUP: what can be reloaded without a restart is reloaded (the token
 * file, the HTTPS certificate and key); a failure keeps what was in use,
 * and says why. */
static void on_sighup(struct pulse_server *srv)
{
    /* The tokens (auth.token-file); it logs what it did itself. */
    (void)pulse_server_reload(srv);
    char msg[1024] = "";
    if (pulse_server_reload_tls(srv, msg, sizeof msg) != PULSE_OK)
        PULSE_ERROR("SIGHUP: %s; still serving the certificate loaded before", msg);
    else
        PULSE_INFO("SIGHUP: %s", msg);
}

/* Waits for the first stop signal (a SIGHUP meanwhile reloads), then
 * drains and closes srv and broker (both set to NULL once gone). 0 after a
 * clean stop; a drain that cannot finish _exits(1). */

static int wait_and_stop(sigset_t *stopset, struct pulse_server **srv, struct pulse_broker **broker)
{
    int sig = 0;
    sigset_t waitset = *stopset;

    sigaddset(&waitset, SIGHUP);
    for (;;) {
        if (sigwait(&waitset, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        on_sighup(*srv);
    }
    PULSE_INFO("signal %d: draining (a second signal exits at once)", sig);
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, second_signal, stopset) == 0)
        pthread_detach(watcher);

    if (pulse_server_shutdown(*srv, SHUTDOWN_DEADLINE_MS) != PULSE_OK) {
        /* A connection is still suspended: stopping MHD would abort. The
         * logs are durable up to what was acknowledged; recovery handles
         * the rest at the next start. */
        PULSE_ERROR("could not drain every request; exiting without a clean close");
        _exit(1);
    }
    pulse_server_destroy(*srv);
    *srv = NULL;
    pulse_broker_close(*broker);
    *broker = NULL;
    pulse_log_flush_limited();
    PULSE_INFO("stopped cleanly");
    return 0;
}

/* Serves until a stop signal: the listener first (a busy port is reported
 * before the data directory is touched, and /readyz answers 503 while
 * recovery runs), then the broker. The exit status. */
static int serve(const struct pulse_config *cfg, sigset_t *stopset)
{
    struct pulse_broker *broker = NULL;
    struct pulse_server *srv = NULL;
    char err[512] = "";
    int rc = 1;

    pulse_status_t st = pulse_server_create(cfg, NULL, &srv, err, sizeof err);
    if (st != PULSE_OK) {
        PULSE_ERROR("%s", err);
        /* A setting the server refused (an unreadable [tls] file, a bad
         * token file, an exposed address without tokens) exits like any
         * bad setting. */
        if (st == PULSE_INVALID)
            rc = EXIT_CONFIG;
        goto out;
    }
    pulse_failpoint_delay("recovery"); /* tests: a recovery that takes long */
    if (open_broker(cfg, &broker) != 0)
        goto out;
    pulse_server_attach(srv, broker);
    pulse_server_set_ready(srv, true);
    char host[256] = "";
    uint16_t port = 0;
    bool v6 = false;
    (void)pulse_server_listen_split(cfg->server.listen, host, sizeof host, &port, &v6);
    PULSE_INFO("pulsed %s listening on %s%s%s:%u data-dir=%s%s", PACKAGE_VERSION, v6 ? "[" : "", host, v6 ? "]" : "",
               (unsigned)pulse_server_port(srv), cfg->server.data_dir,
               !pulse_tls_settings_on(&cfg->tls)    ? ""
               : pulse_tls_settings_mtls(&cfg->tls) ? " (HTTPS, client certificates required)"
                                                    : " (HTTPS)");
    rc = wait_and_stop(stopset, &srv, &broker);
out:
    /* The server goes first: no request may reach a closed broker. */
    if (srv != NULL)
        (void)pulse_server_shutdown(srv, 0);
    pulse_server_destroy(srv);
    pulse_broker_close(broker);
    return rc;
}

/* --hash-token NAME GRANT...: the token is the first line of stdin (its
 * newline dropped); prints the token-file line. 0, or EXIT_CONFIG. */
static int hash_token(int argc, char **argv)
{
    char token[PULSE_AUTH_TOKEN_MAX + 2];
    char line[PULSE_AUTH_LINE_MAX + 1];
    char err[512] = "";

    if (argc < 1) {
        fprintf(stderr, "pulsed: --hash-token NAME [GRANT]...: give the token's name (and its grants); the token "
                        "comes on standard input\n");
        return EXIT_CONFIG;
    }
    size_t len = 0;
    if (fgets(token, sizeof token, stdin) != NULL)
        len = strlen(token);
    while (len > 0 && (token[len - 1] == '\n' || token[len - 1] == '\r'))
        token[--len] = '\0';
    pulse_status_t st = pulse_auth_hash_line(argv[0], (const char *const *)(argv + 1), (size_t)(argc - 1), token, len,
                                             line, sizeof line, err, sizeof err);
    memset(token, 0, sizeof token);
    if (st != PULSE_OK) {
        fprintf(stderr, "pulsed: --hash-token: %s\n", err);
        return EXIT_CONFIG;
    }
    fputs(line, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* --routes: "METHOD TEMPLATE GRANT SUBJECT" per line, from the router's
 * tables (the integration tests walk it). */
static int print_routes(void)
{
    static const char *const subjects[] = {"-", "topic", "consumer", "group", "body"};
    for (int r = 0; r < PULSE_ROUTE_NONE; r++) {
        for (int m = 0; m < PULSE_METHOD_HEAD; m++) {
            if (!pulse_router_allows((enum pulse_route)r, (enum pulse_method)m))
                continue;
            const struct pulse_route_grant *g = pulse_router_grant((enum pulse_route)r, (enum pulse_method)m);
            printf("%s %s %s %s\n", pulse_router_method_name((enum pulse_method)m),
                   pulse_router_template((enum pulse_route)r), pulse_router_grant_name(g->kind),
                   (unsigned)g->subject < 5 ? subjects[g->subject] : "?");
        }
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    int rc;
    struct pulse_config cfg;
    struct mode mode = {false, NULL, NULL, NULL, -1, -1, -1};
    sigset_t stopset;

    if (argc >= 2 && strcmp(argv[1], "--hash-token") == 0)
        return hash_token(argc - 2, argv + 2);
    if (argc == 2 && strcmp(argv[1], "--routes") == 0)
        return print_routes();
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGINT);
    sigaddset(&stopset, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stopset, NULL);
    /* SIGHUP reloads (wait_and_stop); blocked in every thread like the
     * stop signals, but not part of stopset: it never stops pulsed. */
    sigset_t hupset;
    sigemptyset(&hupset);
    sigaddset(&hupset, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hupset, NULL);

    if (pulse_config_init(&cfg) != PULSE_OK) {
        fprintf(stderr, "pulsed: out of memory\n");
        return 1;
    }
    if ((rc = configure(argc, argv, &cfg, &mode)) < 0 && (rc = run_offline(&cfg, &mode)) < 0)
        rc = serve(&cfg, &stopset);
    pulse_config_fini(&cfg);
    return rc;
}
