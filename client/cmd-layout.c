/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl modules, ksyms, events, rescan: the kernel code layout journal. */

#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <string.h>
#include <time.h>

#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"

int64_t json_int_member(struct json_object *o, const char *key, int64_t def) {
        struct json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return def;
        return json_object_get_int64(v);
}

int parse_format_option(const char *value, bool *ret_json) {
        if (streq(value, "json"))
                *ret_json = true;
        else if (streq(value, "table"))
                *ret_json = false;
        else
                return print_error("invalid --format '%s': expected table or json", value);
        return 0;
}

static struct json_object *array_member(struct json_object *o, const char *key) {
        struct json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
                return NULL;
        return v;
}

static void put_str(const char *s) {
        s = s ?: "-";
        put_sanitized(stdout, s, strlen(s));
}

static void put_time(int64_t ns) {
        char buf[TIME_FORMAT_MAX];

        if (ns <= 0)
                fputs("-", stdout);
        else
                fputs(time_format_local_decimals((uint64_t) ns, 3, buf, sizeof buf), stdout);
}

static void warn_truncated(struct json_object *answer, const char *what) {
        struct json_object *t;

        if (json_object_object_get_ex(answer, "truncated", &t) && json_object_get_boolean(t))
                fprintf(stderr, "perfsnapctl: warning: more %s than the daemon returns in one answer; "
                        "use a later --since\n", what);
}

/* Options shared by modules, ksyms and events. */
typedef struct layout_opts {
        const char *since;
        bool flag;              /* --sections / --records */
        bool json;
        int64_t limit;
} layout_opts;

/* flag_name: the command's flag ("sections", "records"), or NULL. */
static int parse_layout_opts(int argc, char **argv, const char *command, const char *flag_name,
                             void (*help)(void), layout_opts *o) {
        struct option options[] = {
                { "since",   required_argument, NULL, ARG_SINCE },
                { "limit",   required_argument, NULL, ARG_LIMIT },
                { "format",  required_argument, NULL, ARG_FORMAT },
                { "socket",  required_argument, NULL, ARG_SOCKET },
                { "help",    no_argument,       NULL, 'h' },
                { flag_name, no_argument,       NULL, ARG_SECTIONS },   /* last: a NULL name ends the list here */
                {}
        };
        int c;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_SINCE:
                        o->since = optarg;
                        break;
                case ARG_SECTIONS:
                        o->flag = true;
                        break;
                case ARG_LIMIT: {
                        char *end;
                        long long v = strtoll(optarg, &end, 10);
                        if (!*optarg || *end || v < 0 || v > 1000000)
                                return print_error("invalid --limit '%s': expected a number 0..1000000", optarg);
                        o->limit = v;
                        break;
                }
                case ARG_FORMAT:
                        if (parse_format_option(optarg, &o->json) != 0)
                                return 1;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help();
                        return -1;
                default:
                        return print_option_error(c, argv, command);
                }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl %s --help')", argv[optind], command);
        return 0;
}

static int layout_call(const char *method, const layout_opts *o, const char *flag_key, struct json_object **ret) {
        _cleanup_(json_object_putp) struct json_object *params = json_object_new_object();
        uint64_t now = clock_ns(CLOCK_REALTIME), since = 0;
        int r;

        if (!params)
                return print_error("out of memory");
        if (o->since) {
                r = parse_time_option("--since", o->since, now, &since);
                if (r != 0)
                        return r;
        }
        json_object_object_add(params, "since_ns", json_object_new_int64((int64_t) since));
        if (flag_key)
                json_object_object_add(params, flag_key, json_object_new_boolean(o->flag));
        if (o->limit > 0)
                json_object_object_add(params, "limit", json_object_new_int64(o->limit));
        return daemon_call(method, params, false, ret);
}

static void help_modules(void) {
        printf("Usage: perfsnapctl [--socket PATH] modules [OPTIONS]\n"
               "\n"
               "Show the kernel modules perfsnapd has seen loaded, oldest first: when each\n"
               "was loaded and unloaded (and how perfsnapd learned of it), its base address,\n"
               "size and build-id. A module loaded twice shows twice, with both addresses.\n"
               "\n"
               "Options:\n"
               "      --since TIME     only modules loaded at some time since TIME\n"
               "                       (default: all that are recorded)\n"
               "      --sections       also show each module's section map: start, length,\n"
               "                       and where the length came from (elf: the module's\n"
               "                       file; next: up to the next section; unknown: the\n"
               "                       last section of its area, length 0)\n"
               "      --limit N        at most N modules (default: the daemon's query_max_rows)\n"
               "      --format FORMAT  table (default) or json\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "TIME: %s.\n", TIME_EXPRESSION_HELP);
}

int cmd_modules(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        layout_opts o = {};
        struct json_object *mods;
        int r;

        r = parse_layout_opts(argc, argv, "modules", "sections", help_modules, &o);
        if (r != 0)
                return r < 0 ? finish_output() : r;
        r = layout_call(PERFSNAP_METHOD_MODULES, &o, "sections", &answer);
        if (r != 0)
                return r;
        if (o.json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }

        mods = array_member(answer, "modules");
        printf("%-20s %-18s %8s %-23s %-23s %-8s %s\n", "Module", "Base", "Size", "Loaded", "Unloaded", "How", "Build-id");
        for (size_t i = 0; mods && i < json_object_array_length(mods); i++) {
                struct json_object *m = json_object_array_get_idx(mods, i), *secs;
                const char *name = json_string_member(m, "name");

                printf("%-20.20s ", name ?: "-");
                printf("%-18s %8" PRId64 " ", json_string_member(m, "base") ?: "-", json_int_member(m, "size", 0));
                put_time(json_int_member(m, "loaded_ns", 0));
                fputs(" ", stdout);
                if (json_int_member(m, "unloaded_ns", 0) > 0)
                        put_time(json_int_member(m, "unloaded_ns", 0));
                else
                        printf("%-23s", "(loaded)");
                printf(" %-8s ", json_string_member(m, "loaded_how") ?: "-");
                put_str(json_string_member(m, "build_id"));
                fputs("\n", stdout);

                secs = array_member(m, "sections");
                for (size_t j = 0; o.flag && secs && j < json_object_array_length(secs); j++) {
                        struct json_object *x = json_object_array_get_idx(secs, j);
                        struct json_object *ex;
                        bool exec = json_object_object_get_ex(x, "exec", &ex) && json_object_get_boolean(ex);

                        fputs("    ", stdout);
                        printf("%-18s %8" PRId64 " %-7s %s ", json_string_member(x, "addr") ?: "-", json_int_member(x, "len", 0),
                               json_string_member(x, "len_source") ?: "-", exec ? "x" : "-");
                        put_str(json_string_member(x, "name"));
                        fputs("\n", stdout);
                }
        }
        warn_truncated(answer, "modules");
        return finish_output();
}

static void help_events(void) {
        printf("Usage: perfsnapctl [--socket PATH] events [OPTIONS]\n"
               "\n"
               "Show the journal of changes to the kernel's code layout, oldest first:\n"
               "perfsnapd starting, modules loaded and unloaded, dynamic symbols (BPF\n"
               "programs, trampolines, out-of-line code) registered and unregistered.\n"
               "Every entry carries the complete layout after the change (the kernel's\n"
               "build-id and _text address, one section-map record per section of every\n"
               "loaded module, and one ksymbol record per registered dynamic symbol), so\n"
               "the layout at any entry is known from that entry alone.\n"
               "\n"
               "Options:\n"
               "      --since TIME     only entries since TIME (default: all that are kept)\n"
               "      --records        also show each entry's section-map and ksymbol records (always\n"
               "                       included with --format json)\n"
               "      --limit N        at most N entries (default: the daemon's query_max_rows)\n"
               "      --format FORMAT  table (default) or json\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "TIME: %s.\n", TIME_EXPRESSION_HELP);
}

int cmd_events(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        layout_opts o = {};
        struct json_object *evs;
        int r;

        r = parse_layout_opts(argc, argv, "events", "records", help_events, &o);
        if (r != 0)
                return r < 0 ? finish_output() : r;
        if (o.json)
                o.flag = true;
        r = layout_call(PERFSNAP_METHOD_EVENTS, &o, "records", &answer);
        if (r != 0)
                return r;
        if (o.json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }

        evs = array_member(answer, "events");
        printf("%-23s %-16s %-20s %8s  %s\n", "Time", "Event", "Module", "Records", "Detail");
        for (size_t i = 0; evs && i < json_object_array_length(evs); i++) {
                struct json_object *e = json_object_array_get_idx(evs, i), *recs;
                const char *ksym = json_string_member(e, "ksym");

                put_time(json_int_member(e, "time_ns", 0));
                printf(" %-16s %-20.20s %8" PRId64 "  ", json_string_member(e, "kind") ?: "-",
                       json_string_member(e, "module") ?: "-", json_int_member(e, "n_records", 0));
                if (ksym) {
                        put_str(ksym);
                        fputs(": ", stdout);
                }
                put_str(json_string_member(e, "detail"));
                fputs("\n", stdout);

                recs = array_member(e, "records");
                for (size_t j = 0; recs && j < json_object_array_length(recs); j++) {
                        struct json_object *x = json_object_array_get_idx(recs, j);
                        const char *type = json_string_member(x, "type");

                        if (type && streq(type, "ksymbol")) {
                                printf("    %-18s %8" PRId64 " %8s [%-18.18s] ", json_string_member(x, "addr") ?: "-",
                                       json_int_member(x, "len", 0), "-", json_string_member(x, "ksym_type") ?: "-");
                                put_str(json_string_member(x, "name"));
                        } else {
                                printf("    %-18s %8" PRId64 " %8" PRId64 " %-20.20s ", json_string_member(x, "start") ?: "-",
                                       json_int_member(x, "len", 0), json_int_member(x, "pgoff", 0),
                                       json_string_member(x, "module") ?: "-");
                                put_str(json_string_member(x, "section"));
                        }
                        fputs("\n", stdout);
                }
        }
        warn_truncated(answer, "entries");
        return finish_output();
}

static void help_ksyms(void) {
        printf("Usage: perfsnapctl [--socket PATH] ksyms [OPTIONS]\n"
               "\n"
               "Show the dynamic kernel symbols perfsnapd has seen, in the order they were\n"
               "registered: JIT-ed BPF programs (bpf_prog_<tag>_<name>), BPF trampolines\n"
               "and dispatchers, and out-of-line code (kprobe instruction slots, ftrace\n"
               "trampolines). The kernel announces each with a PERF_RECORD_KSYMBOL; those\n"
               "present when perfsnapd started come from kallsyms. Each row gives the\n"
               "symbol's address range, when it was registered and unregistered, and how\n"
               "perfsnapd learned of it (startup, perf, rescan). Prog-id is the BPF\n"
               "program's id (bpftool prog show id N) while it is known.\n"
               "\n"
               "Options:\n"
               "      --since TIME     only symbols registered at some time since TIME\n"
               "      --limit N        at most N symbols (default: the daemon's query_max_rows)\n"
               "      --format FORMAT  table (default) or json\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "TIME: %s.\n", TIME_EXPRESSION_HELP);
}

int cmd_ksyms(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        layout_opts o = {};
        struct json_object *ks;
        int r;

        r = parse_layout_opts(argc, argv, "ksyms", NULL, help_ksyms, &o);
        if (r != 0)
                return r < 0 ? finish_output() : r;
        r = layout_call(PERFSNAP_METHOD_KSYMS, &o, NULL, &answer);
        if (r != 0)
                return r;
        if (o.json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }

        ks = array_member(answer, "ksyms");
        printf("%-18s %8s %-7s %7s %-23s %-23s %-8s %s\n", "Address", "Length", "Type", "Prog-id", "Registered",
               "Unregistered", "How", "Symbol");
        for (size_t i = 0; ks && i < json_object_array_length(ks); i++) {
                struct json_object *k = json_object_array_get_idx(ks, i);
                int64_t prog = json_int_member(k, "prog_id", 0);

                printf("%-18s %8" PRId64 " %-7.7s ", json_string_member(k, "addr") ?: "-", json_int_member(k, "len", 0),
                       json_string_member(k, "type") ?: "-");
                if (prog > 0)
                        printf("%7" PRId64 " ", prog);
                else
                        printf("%7s ", "-");
                put_time(json_int_member(k, "registered_ns", 0));
                fputs(" ", stdout);
                if (json_int_member(k, "unregistered_ns", 0) > 0)
                        put_time(json_int_member(k, "unregistered_ns", 0));
                else
                        printf("%-23s", "(registered)");
                printf(" %-8s ", json_string_member(k, "registered_how") ?: "-");
                put_str(json_string_member(k, "name"));
                fputs("\n", stdout);
        }
        warn_truncated(answer, "symbols");
        return finish_output();
}

static void help_rescan(void) {
        printf("Usage: perfsnapctl [--socket PATH] rescan\n"
               "\n"
               "Make perfsnapd compare /proc/modules with the modules it tracks now, and\n"
               "the dynamic symbols of /proc/kallsyms ([bpf], [__builtin__*] lines) with\n"
               "the dynamic symbols it tracks, and record (and journal) what it missed\n"
               "loading or unloading. Only root may ask for this. perfsnapd rescans the\n"
               "modules by itself every rescan_interval and whenever kernel uevents were\n"
               "lost, and the dynamic symbols whenever perf records were lost.\n"
               "\n"
               "Options:\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n");
}

int cmd_rescan(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        int r;

        r = parse_simple_options(argc, argv, "rescan", help_rescan, NULL);
        if (r != 0)
                return r < 0 ? finish_output() : r;

        r = daemon_call(PERFSNAP_METHOD_RESCAN, NULL, false, &answer);
        if (r != 0)
                return r;
        printf("Rescanned: %" PRId64 " added, %" PRId64 " removed, %" PRId64 " modules loaded; "
               "%" PRId64 " dynamic symbols registered, %" PRId64 " unregistered, %" PRId64 " live.\n",
               json_int_member(answer, "added", 0), json_int_member(answer, "removed", 0), json_int_member(answer, "loaded", 0),
               json_int_member(answer, "ksyms_registered", 0), json_int_member(answer, "ksyms_unregistered", 0),
               json_int_member(answer, "ksyms_live", 0));
        return finish_output();
}
