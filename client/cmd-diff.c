/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl diff: what changed between two time windows. Two Query
 * calls with the same filters; per (module, symbol), over all commands,
 * its share of each window's samples, and the change, largest first
 * ("what got slower since yesterday"). */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "hashmap.h"
#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

#define DEFAULT_DIFF_TOP 25

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free)

typedef struct diff_row {
        const char *module, *symbol;
        bool kernel;
        uint64_t samples[2];    /* base, new */
        double change;          /* share in new - share in base, percentage points */
} diff_row;

static double share(uint64_t samples, uint64_t total) {
        return total > 0 ? 100.0 * (double) samples / (double) total : 0.0;
}

static int diff_row_cmp(const void *x, const void *y) {
        const diff_row *a = x, *b = y;
        double da = fabs(a->change), db = fabs(b->change);
        int d;

        if (da != db)
                return da > db ? -1 : 1;
        d = strcmp(a->module, b->module);
        return d != 0 ? d : strcmp(a->symbol, b->symbol);
}

/* Adds the rows of r (window w) to the table, keyed by module and symbol. */
static int add_rows(hashmap *idx, diff_row **rows, size_t *n, size_t *alloc, const query_result *r, unsigned w) {
        for (size_t i = 0; i < r->n_rows; i++) {
                const query_row *qr = &r->rows[i];
                size_t ml = strlen(qr->module), sl = strlen(qr->symbol);
                _cleanup_free_ char *key = malloc(ml + sl + 2);
                int64_t at;
                int k;

                if (!key)
                        return -ENOMEM;
                memcpy(key, qr->module, ml + 1);
                memcpy(key + ml + 1, qr->symbol, sl + 1);
                if (hashmap_get(idx, key, ml + sl + 2, &at) < 0) {
                        k = array_reserve_one((void **) rows, alloc, *n, sizeof(diff_row));
                        if (k < 0)
                                return k;
                        k = hashmap_put(idx, key, ml + sl + 2, (int64_t) *n);
                        if (k < 0)
                                return k;
                        (*rows)[*n] = (diff_row) { .module = qr->module, .symbol = qr->symbol, .kernel = qr->kernel };
                        at = (int64_t) (*n)++;
                }
                (*rows)[at].samples[w] += qr->samples;
        }
        return 0;
}

static void help_diff(void) {
        printf("Usage: perfsnapctl [--socket PATH] diff --base-since TIME --base-until TIME\n"
               "                   [--since TIME] [--until TIME] [OPTIONS]\n"
               "\n"
               "Compare two time ranges: for each function (module and symbol, all commands\n"
               "together), its share of the samples in the base range and in the new one, and\n"
               "the change in percentage points, largest change first.\n"
               "\n"
               "Options:\n"
               "      --base-since TIME  start of the base range\n"
               "      --base-until TIME  end of the base range, exclusive\n"
               "      --since TIME       start of the new range (default: 5m)\n"
               "      --until TIME       end of the new range, exclusive (default: now)\n"
               "      --pid, --comm, --cpu, --dso, --unit, --cgroup, --container, --kernel-only,\n"
               "      --user-only, --inline, --type\n"
               "                         as for query, applied to both ranges (--type offcpu:\n"
               "                         shares of the time waited)\n"
               "      --top N            at most N rows (default: %d; 0: all)\n"
               "      --format FORMAT    table (default) or json\n"
               "      --socket PATH      connect to PATH instead of the default socket\n"
               "  -h, --help             show this help\n"
               "\n"
               "Both ranges are read with the daemon's row cap (query_max_rows): a function\n"
               "beyond it in one range counts as 0 there.\n"
               "\n"
               "Example: what got slower since the same hour yesterday\n"
               "  perfsnapctl diff --base-since \"2026-11-24 14:00\" --base-until \"2026-11-24 15:00\" \\\n"
               "                   --since \"2026-11-25 14:00\" --until \"2026-11-25 15:00\"\n",
               DEFAULT_DIFF_TOP);
}

enum { ARG_BASE_SINCE = 0x200, ARG_BASE_UNTIL };

int cmd_diff(int argc, char **argv) {
        static const struct option options[] = {
                QUERY_OPTIONS,
                { "base-since", required_argument, NULL, ARG_BASE_SINCE },
                { "base-until", required_argument, NULL, ARG_BASE_UNTIL },
                { "top",    required_argument, NULL, ARG_TOP },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(query_result_freep) query_result *base = NULL, *new = NULL;
        query_result **res[2] = { &base, &new };
        _cleanup_(hashmap_freep) hashmap *idx = NULL;
        _cleanup_free_ diff_row *rows = NULL;
        query_window w[2] = { { .since = NULL }, { .since = "5m" } };
        query_params q[2] = { QUERY_PARAMS_INIT, QUERY_PARAMS_INIT };
        size_t n = 0, alloc = 0;
        uint32_t top = DEFAULT_DIFF_TOP;
        bool json = false;
        uint64_t now_ns;
        int c, r;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
                r = parse_query_option(c, optarg, &w[1], &q[1]);
                if (r < 0)
                        return EXIT_FAILURE;
                if (r == 1)
                        continue;
                switch (c) {
                case ARG_BASE_SINCE:
                        w[0].since = optarg;
                        break;
                case ARG_BASE_UNTIL:
                        w[0].until = optarg;
                        break;
                case ARG_TOP:
                        r = parse_top_option(optarg, "rows", &top);
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
                        help_diff();
                        return finish_output();
                default:
                        return print_option_error(c, argv, "diff");
                }
        }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl diff --help')", argv[optind]);
        if (!w[0].since || !w[0].until)
                return print_error("give the base range with --base-since and --base-until (see 'perfsnapctl diff --help')");

        /* The same filters for both, the base's own window. */
        q[0] = q[1];
        now_ns = clock_ns(CLOCK_REALTIME);
        for (unsigned i = 0; i < 2; i++) {
                q[i].since_ns = q[i].until_ns = 0;
                r = query_window_apply(&w[i], now_ns, &q[i]);
                if (r != 0)
                        return r;
                r = query_fetch(&q[i], res[i]);
                if (r != 0)
                        return r;
        }

        r = hashmap_new(&idx);
        for (unsigned i = 0; r >= 0 && i < 2; i++)
                r = add_rows(idx, &rows, &n, &alloc, *res[i], i);
        if (r < 0)
                return print_error("out of memory");
        for (size_t i = 0; i < n; i++)
                rows[i].change = share(rows[i].samples[1], new->total_samples) -
                                 share(rows[i].samples[0], base->total_samples);
        qsort(rows, n, sizeof(diff_row), diff_row_cmp);
        if (top > 0 && n > top)
                n = top;

        if (json) {
                _cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();
                struct json_object *a = json_object_new_array();

                if (!doc || !a || json_object_object_add(doc, "rows", a) < 0)
                        return print_error("out of memory");
                json_object_object_add(doc, "base_total", json_object_new_uint64(base->total_samples));
                json_object_object_add(doc, "total", json_object_new_uint64(new->total_samples));
                for (size_t i = 0; i < n; i++) {
                        struct json_object *o = json_object_new_object();

                        if (!o || json_object_array_add(a, o) < 0)
                                return print_error("out of memory");
                        json_object_object_add(o, "module", json_object_new_string(rows[i].module));
                        json_object_object_add(o, "symbol", json_object_new_string(rows[i].symbol));
                        json_object_object_add(o, "kernel", json_object_new_boolean(rows[i].kernel));
                        json_object_object_add(o, "base_samples", json_object_new_uint64(rows[i].samples[0]));
                        json_object_object_add(o, "samples", json_object_new_uint64(rows[i].samples[1]));
                        json_object_object_add(o, "change", json_object_new_double(rows[i].change));
                }
                r = print_json(doc);
                return r != 0 ? r : finish_output();
        }

        char a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX];
        const char *unit = q[1].kind == SAMPLE_KIND_OFFCPU ? "ns off CPU" : "samples";
        printf("# Base: %s .. %s, %" PRIu64 " %s\n", time_format_local_decimals(q[0].since_ns, 0, a, sizeof a) ?: "?",
               time_format_local_decimals(q[0].until_ns ?: now_ns, 0, b, sizeof b) ?: "?", base->total_samples, unit);
        printf("# New:  %s .. %s, %" PRIu64 " %s\n", time_format_local_decimals(q[1].since_ns, 0, a, sizeof a) ?: "?",
               time_format_local_decimals(q[1].until_ns ?: now_ns, 0, b, sizeof b) ?: "?", new->total_samples, unit);
        if (base->total_samples == 0 || new->total_samples == 0)
                printf("# %s range has no samples: shares there are 0\n", base->total_samples == 0 ? "the base" : "the new");
        printf("#   Base      New   Change  Module / Symbol\n");
        for (size_t i = 0; i < n; i++) {
                printf("%7.2f%% %7.2f%% %+7.2f  ", share(rows[i].samples[0], base->total_samples),
                       share(rows[i].samples[1], new->total_samples), rows[i].change);
                put_sanitized(stdout, rows[i].module, SIZE_MAX);
                fputs(rows[i].kernel ? "  [k] " : "  [.] ", stdout);
                put_sanitized(stdout, rows[i].symbol, SIZE_MAX);
                fputc('\n', stdout);
        }
        return finish_output();
}
