/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl units: the CPU time of each systemd unit (or cgroup without
 * one) over a past window, kernel against user, and its most sampled
 * function — systemd-cgtop for a time range that is over. */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cgroup.h"
#include "hashmap.h"
#include "macro.h"
#include "perfsnapctl.h"
#include "query.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

#define DEFAULT_UNITS_TOP 25

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free)

typedef struct unit_row {
        char name[CGROUP_UNIT_MAX];     /* the unit, else the cgroup's path, "[unknown]" */
        uint64_t samples, kernel;
        const query_row *top;           /* the most sampled function of its cgroups */
} unit_row;

static int unit_row_cmp(const void *x, const void *y) {
        const unit_row *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        return strcmp(a->name, b->name);
}

static void help_units(void) {
        printf("Usage: perfsnapctl [--socket PATH] units [OPTIONS]\n"
               "\n"
               "The CPU time of each systemd unit in a time range, from the samples: its\n"
               "share of all samples, the CPUs it kept busy on average, the kernel and user\n"
               "parts, and the function sampled most in it. A cgroup that is in no unit\n"
               "(the root cgroup of kernel threads, a container runtime's own layout) is\n"
               "shown by its path; samples whose cgroup was not known as \"[unknown]\".\n"
               "The units of a user's manager are named after it: user@1000.service/foo.service.\n"
               "\n"
               "Options:\n"
               "      --since TIME     start of the range (default: 5m)\n"
               "      --until TIME     end of the range, exclusive (default: now)\n"
               "      --pid, --comm, --cpu, --dso, --unit, --cgroup, --container, --kernel-only,\n"
               "      --user-only      as for query\n"
               "      --top N          at most N units (default: %d; 0: all)\n"
               "      --format FORMAT  table (default) or json\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "The daemon counts each cgroup's samples over all of its functions; a\n"
               "unit's top symbol is the most sampled function of its cgroups. At most\n"
               "query_max_rows cgroups are told apart; the samples of those beyond show\n"
               "as \"[cgroups beyond query_max_rows]\".\n"
               "\n"
               "Example: which services burned the CPU in the last hour\n"
               "  perfsnapctl units --since 1h\n",
               DEFAULT_UNITS_TOP);
}

/* The name rows of path are shown under. */
static void unit_name_of(const char *path, char *buf, size_t size) {
        cgroup_info info;

        if (!path || !path[0]) {
                snprintf(buf, size, "[unknown]");
                return;
        }
        cgroup_info_of(path, &info);
        snprintf(buf, size, "%s", info.unit[0] ? info.unit : path);
}

static int print_units(const query_params *q, uint64_t now_ns, const query_result *r, const unit_row *u, size_t n,
                       uint64_t beyond, bool json) {
        uint64_t window_ns = (q->until_ns ?: now_ns) - q->since_ns;
        char a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX];
        /* The CPUs a sample stands for: its period over the window. */
        double per_sample = 0;
        size_t width = strlen("Unit");

        if (window_ns > 0)
                per_sample = (double) sample_period_ns() / (double) window_ns;

        if (json) {
                _cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();
                struct json_object *units = json_object_new_array();

                if (!doc || !units || json_object_object_add(doc, "units", units) < 0)
                        return print_error("out of memory");
                json_object_object_add(doc, "total", json_object_new_uint64(r->total_samples));
                json_object_object_add(doc, "since_ns", json_object_new_uint64(q->since_ns));
                json_object_object_add(doc, "until_ns", json_object_new_uint64(q->until_ns ?: now_ns));
                json_object_object_add(doc, "beyond_cgroups", json_object_new_uint64(beyond));
                for (size_t i = 0; i < n; i++) {
                        struct json_object *o = json_object_new_object();

                        if (!o || json_object_array_add(units, o) < 0)
                                return print_error("out of memory");
                        json_object_object_add(o, "unit", json_object_new_string(u[i].name));
                        json_object_object_add(o, "samples", json_object_new_uint64(u[i].samples));
                        json_object_object_add(o, "kernel_samples", json_object_new_uint64(u[i].kernel));
                        if (per_sample > 0)
                                json_object_object_add(o, "cpus", json_object_new_double((double) u[i].samples * per_sample));
                        if (u[i].top) {
                                json_object_object_add(o, "top_symbol", json_object_new_string(u[i].top->symbol));
                                json_object_object_add(o, "top_module", json_object_new_string(u[i].top->module));
                                json_object_object_add(o, "top_samples", json_object_new_uint64(u[i].top->samples));
                        }
                }
                int k = print_json(doc);
                return k != 0 ? k : finish_output();
        }

        printf("# Samples: %" PRIu64 " (lost: %" PRIu64 ")  CPUs: %" PRIu32 "\n", r->total_samples, r->lost, r->n_cpus);
        printf("# Time: %s .. %s\n", time_format_local_decimals(q->since_ns, 2, a, sizeof a) ?: "?",
               time_format_local_decimals(q->until_ns ?: now_ns, 2, b, sizeof b) ?: "?");
        if (n == 0 && beyond == 0) {
                printf("# no samples in this time range\n");
                return finish_output();
        }
        for (size_t i = 0; i < n; i++)
                width = MAX(width, strlen(u[i].name));
        width = MIN(width, (size_t) 48);
        printf("# Overhead     CPUs    Samples  Kernel    User  ");
        put_column("Unit", width, false);
        printf("  Top symbol\n");
        for (size_t i = 0; i < n; i++) {
                double share = (double) u[i].samples / (double) MAX(r->total_samples, (uint64_t) 1);
                double k = (double) u[i].kernel / (double) MAX(u[i].samples, (uint64_t) 1);

                printf("%9.2f%%  %7.2f  %9" PRIu64 "  %5.1f%%  %5.1f%%  ", 100.0 * share, (double) u[i].samples * per_sample,
                       u[i].samples, 100.0 * k, 100.0 * (1 - k));
                put_column(u[i].name, width, false);
                if (u[i].top) {
                        fputs(u[i].top->kernel ? "  [k] " : "  [.] ", stdout);
                        put_sanitized(stdout, u[i].top->symbol, SIZE_MAX);
                }
                fputc('\n', stdout);
        }
        /* With --dso, the cgroups count only the samples whose function is
         * in it. */
        if (beyond > 0)
                printf("%9.2f%%  %7.2f  %9" PRIu64 "                  %s\n",
                       100.0 * (double) beyond / (double) MAX(r->total_samples, (uint64_t) 1),
                       (double) beyond * per_sample, beyond,
                       q->dso ? "[outside --dso, or cgroups beyond query_max_rows]" : "[cgroups beyond query_max_rows]");
        return finish_output();
}

int cmd_units(int argc, char **argv) {
        static const struct option options[] = {
                QUERY_OPTIONS,
                { "top",    required_argument, NULL, ARG_TOP },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(query_result_freep) query_result *res = NULL;
        _cleanup_(hashmap_freep) hashmap *idx = NULL;
        _cleanup_free_ unit_row *units = NULL;
        query_window w = { .since = "5m" };
        query_params q = QUERY_PARAMS_INIT;
        size_t n = 0, alloc = 0;
        uint32_t top = DEFAULT_UNITS_TOP;
        uint64_t now_ns, in_totals = 0;
        bool json = false;
        int c, r;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
                r = parse_query_option(c, optarg, &w, &q);
                if (r < 0)
                        return EXIT_FAILURE;
                if (r == 1)
                        continue;
                switch (c) {
                case ARG_TOP:
                        r = parse_top_option(optarg, "units", &top);
                        if (r != 0)
                                return r;
                        break;
                case ARG_FORMAT:
                        r = parse_format_option(optarg, &json);
                        if (r != 0)
                                return r;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_units();
                        return finish_output();
                default:
                        return print_option_error(c, argv, "units");
                }
        }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl units --help')", argv[optind]);
        if (q.kind != SAMPLE_KIND_CPU)
                return print_error("units shows CPU time: --type offcpu is for query, export and diff");
        now_ns = clock_ns(CLOCK_REALTIME);
        r = query_window_apply(&w, now_ns, &q);
        if (r != 0)
                return r;

        /* Rows told apart by cgroup, not by command: the top function of
         * a unit is over all of its commands. The daemon's cgroup totals
         * count every row; the rows themselves are not needed. */
        q.by_cgroup = true;
        q.no_comm = true;
        q.cgroup_totals = true;
        q.top = 1;
        r = query_fetch(&q, &res);
        if (r != 0)
                return r;

        if (hashmap_new(&idx) < 0)
                return print_error("out of memory");
        for (size_t i = 0; i < res->n_cgroup_totals; i++) {
                const query_cgroup_total *cg = &res->cgroup_totals[i];
                char name[CGROUP_UNIT_MAX];
                int64_t at;

                unit_name_of(cg->cgroup, name, sizeof name);
                if (hashmap_get(idx, name, strlen(name), &at) < 0) {
                        if (array_reserve_one((void **) &units, &alloc, n, sizeof(unit_row)) < 0 ||
                            hashmap_put(idx, name, strlen(name), (int64_t) n) < 0)
                                return print_error("out of memory");
                        units[n] = (unit_row) {};
                        snprintf(units[n].name, sizeof units[n].name, "%s", name);
                        at = (int64_t) n++;
                }
                units[at].samples += cg->samples;
                units[at].kernel += cg->kernel;
                if (!units[at].top || cg->top.samples > units[at].top->samples)
                        units[at].top = &cg->top;
                in_totals += cg->samples;
        }
        qsort(units, n, sizeof(unit_row), unit_row_cmp);
        if (top > 0 && n > top)
                n = top;
        return print_units(&q, now_ns, res, units, n, res->total_samples - MIN(in_totals, res->total_samples), json);
}
