/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl snapshot, cache list, cache prune: the kcore snapshots in
 * perfsnapd's build-id cache. */

#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <string.h>

#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"

static bool bool_member(struct json_object *o, const char *key) {
        struct json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static void put_str(const char *s) {
        s = s ?: "-";
        put_sanitized(stdout, s, strlen(s));
}

static void put_removed(struct json_object *answer) {
        struct json_object *a;
        char size[32];

        if (!json_object_object_get_ex(answer, "removed", &a) || !json_object_is_type(a, json_type_array))
                return;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                struct json_object *o = json_object_array_get_idx(a, i);

                format_bytes((uint64_t) json_int_member(o, "size", 0), size, sizeof size);
                fputs("removed ", stdout);
                put_str(json_string_member(o, "path"));
                printf(" (%s)\n", size);
        }
}

static void help_snapshot(void) {
        printf("Usage: perfsnapctl [--socket PATH] snapshot [OPTIONS]\n"
               "\n"
               "Make perfsnapd snapshot the kernel's code now and wait for it: the\n"
               "executable parts of /proc/kcore that hold the kernel text and the modules,\n"
               "with /proc/kallsyms and /proc/modules, in perf's build-id cache layout\n"
               "(CACHE/[kernel.kcore]/BUILD-ID/YYYYmmddHHMMSShh/). If a snapshot of the\n"
               "same kernel with the same modules at the same addresses is in the cache\n"
               "already, it is reused instead. Only root may ask for this; perfsnapd takes\n"
               "snapshots by itself at start-up and after modules are loaded or unloaded.\n"
               "\n"
               "Options:\n"
               "      --format FORMAT  table (default) or json (the daemon's answer as is)\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n");
}

int cmd_snapshot(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        char size[32], kcore[32];
        const char *err;
        bool json = false;
        int r;

        r = parse_simple_options(argc, argv, "snapshot", help_snapshot, &json);
        if (r != 0)
                return r < 0 ? finish_output() : r;
        r = daemon_call(PERFSNAP_METHOD_SNAPSHOT, NULL, false, &answer);
        if (r != 0)
                return r;
        if (json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }
        put_str(json_string_member(answer, "result"));
        fputs(" ", stdout);
        put_str(json_string_member(answer, "path"));
        fputs("\n  kernel build-id ", stdout);
        put_str(json_string_member(answer, "build_id"));
        fputs(", _text ", stdout);
        put_str(json_string_member(answer, "text_addr"));
        printf(", %" PRId64 " modules\n", json_int_member(answer, "modules", 0));
        err = json_string_member(answer, "kcore_error");
        if (bool_member(answer, "kcore")) {
                format_bytes((uint64_t) json_int_member(answer, "kcore_bytes", 0), kcore, sizeof kcore);
                if (streq(json_string_member(answer, "result") ?: "", "created"))
                        printf("  kcore: %s of code in %" PRId64 " segments\n", kcore,
                               json_int_member(answer, "kcore_segments", 0));
                else
                        fputs("  kcore: yes\n", stdout);
        } else {
                fputs("  kcore: missing", stdout);
                if (err) {
                        fputs(" (", stdout);
                        put_str(err);
                        fputs(")", stdout);
                }
                fputs("\n", stdout);
        }
        format_bytes((uint64_t) json_int_member(answer, "size", 0), size, sizeof size);
        printf("  size %s, reused %" PRId64 " time%s, %" PRId64 " ms\n", size, json_int_member(answer, "reuses", 0),
               json_int_member(answer, "reuses", 0) == 1 ? "" : "s",
               json_int_member(answer, "duration_ns", 0) / (int64_t) NSEC_PER_MSEC);
        put_removed(answer);
        return finish_output();
}

static void help_cache(void) {
        printf("Usage: perfsnapctl [--socket PATH] cache list [OPTIONS]\n"
               "       perfsnapctl [--socket PATH] cache prune [--max-size SIZE] [--max-age AGE]\n"
               "\n"
               "list   Show the kcore snapshots in perfsnapd's build-id cache, oldest first:\n"
               "       when each was made (its directory name, local time), the kernel's\n"
               "       build-id, how many modules it holds, the kernel's _text address (it\n"
               "       changes with every boot under KASLR), its size, whether it holds a\n"
               "       kcore copy, and how often perfsnapd reused it since. '*' marks the\n"
               "       snapshot of the kernel's current layout.\n"
               "prune  Remove snapshots, oldest first, while the cache is larger than SIZE\n"
               "       or a snapshot is older than AGE. The newest snapshot and the current\n"
               "       one are never removed. Without options the configured cache_max_size\n"
               "       and cache_max_age apply. Only root may prune.\n"
               "\n"
               "perf reads the cache too: perf report --kallsyms=SNAPSHOT/kallsyms takes\n"
               "kcore and modules from the same directory; perf --buildid-dir CACHE ...\n"
               "makes perf use the cache as its own.\n"
               "\n"
               "Options:\n"
               "      --format FORMAT  (list) table (default) or json (the daemon's answer as is)\n"
               "      --max-size SIZE  (prune) e.g. 500M, 2G; 0 for no size limit\n"
               "      --max-age AGE    (prune) e.g. 12h, 7d; 0 for no age limit\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n");
}

static int cache_list(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        struct json_object *a;
        uint64_t total = 0;
        char size[32];
        bool json = false;
        size_t n;
        int r;

        r = parse_simple_options(argc, argv, "cache", help_cache, &json);
        if (r != 0)
                return r < 0 ? finish_output() : r;
        r = daemon_call(PERFSNAP_METHOD_CACHE_LIST, NULL, false, &answer);
        if (r != 0)
                return r;
        if (json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }
        if (!json_object_object_get_ex(answer, "snapshots", &a) || !json_object_is_type(a, json_type_array))
                return print_error("the daemon's answer has no snapshot list");
        n = json_object_array_length(a);
        printf("%-22s %-16s %-12s %7s %-18s %10s %-5s %6s\n", "TIME", "NAME", "BUILD-ID", "MODULES", "_TEXT", "SIZE",
               "KCORE", "REUSES");
        for (size_t i = 0; i < n; i++) {
                struct json_object *o = json_object_array_get_idx(a, i);
                const char *bid = json_string_member(o, "build_id") ?: "-";

                put_str(json_string_member(o, "time"));
                printf(" %-16.16s ", json_string_member(o, "name") ?: "-");
                put_sanitized(stdout, bid, MIN(strlen(bid), (size_t) 12));
                printf("%*s %7" PRId64 " %-18s ", (int) (12 - MIN(strlen(bid), (size_t) 12)), "",
                       json_int_member(o, "modules", 0), json_string_member(o, "text_addr") ?: "-");
                format_bytes((uint64_t) json_int_member(o, "size", 0), size, sizeof size);
                total += (uint64_t) json_int_member(o, "size", 0);
                printf("%10s %-5s %6" PRId64 "%s\n", size, bool_member(o, "kcore") ? "yes" : "no",
                       json_int_member(o, "reuses", 0), bool_member(o, "current") ? " *" : "");
        }
        format_bytes(total, size, sizeof size);
        printf("%zu snapshot%s, %s in ", n, n == 1 ? "" : "s", size);
        put_str(json_string_member(answer, "cache_dir"));
        fputs("\n", stdout);
        return finish_output();
}

static int cache_prune(int argc, char **argv) {
        static const struct option options[] = {
                { "max-size", required_argument, NULL, ARG_MAX_SIZE },
                { "max-age",  required_argument, NULL, ARG_MAX_AGE },
                { "socket",   required_argument, NULL, ARG_SOCKET },
                { "help",     no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        _cleanup_(json_object_putp) struct json_object *params = json_object_new_object();
        char size[32];
        uint64_t v;
        int c, r;

        if (!params)
                return print_error("out of memory");
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_MAX_SIZE:
                        if (size_parse(optarg, &v) < 0 || v > INT64_MAX)
                                return print_error("invalid --max-size '%s': expected a size such as 500M or 2G, or 0", optarg);
                        json_object_object_add(params, "max_size", json_object_new_int64((int64_t) v));
                        break;
                case ARG_MAX_AGE:
                        if (duration_parse(optarg, &v) < 0 || v > INT64_MAX)
                                return print_error("invalid --max-age '%s': expected a duration such as 12h or 7d, or 0", optarg);
                        json_object_object_add(params, "max_age_ns", json_object_new_int64((int64_t) v));
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_cache();
                        return finish_output();
                default:
                        return print_option_error(c, argv, "cache");
                }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl cache --help')", argv[optind]);
        r = daemon_call(PERFSNAP_METHOD_CACHE_PRUNE, params, false, &answer);
        if (r != 0)
                return r;
        put_removed(answer);
        format_bytes((uint64_t) json_int_member(answer, "remaining_size", 0), size, sizeof size);
        printf("%" PRId64 " snapshot%s left, %s in ", json_int_member(answer, "remaining", 0),
               json_int_member(answer, "remaining", 0) == 1 ? "" : "s", size);
        put_str(json_string_member(answer, "cache_dir"));
        fputs("\n", stdout);
        return finish_output();
}

int cmd_cache(int argc, char **argv) {
        if (argc < 2)
                return print_error("cache: expected 'list' or 'prune' (see 'perfsnapctl cache --help')");
        if (streq(argv[1], "--help") || streq(argv[1], "-h")) {
                help_cache();
                return finish_output();
        }
        if (streq(argv[1], "list"))
                return cache_list(argc - 1, argv + 1);
        if (streq(argv[1], "prune"))
                return cache_prune(argc - 1, argv + 1);
        return print_error("cache: unknown subcommand '%s': expected list or prune", argv[1]);
}
