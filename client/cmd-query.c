/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl query: where the CPU time went in a time range, as a
 * perf-report-like table, JSON or folded stacks. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "calltree.h"
#include "cgroup.h"
#include "hashmap.h"
#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

#define DEFAULT_SINCE "5m"
#define DEFAULT_TABLE_TOP 25

/* Column caps for the table: comm is at most 15 bytes from the kernel, but
 * module paths of user mappings can be long. */
#define COMM_COLUMN_MAX 16
#define MODULE_COLUMN_MAX 40
/* With --inline, the symbol column is followed by another. */
#define SYMBOL_COLUMN_MAX 48

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(hashmap *, hashmap_free)

/* Prints s in a column of width bytes, left-aligned; longer strings are
 * cut with "..." at the end, or at the start for paths (whose last part
 * is the informative one). */
void put_column(const char *s, size_t width, bool cut_front) {
        size_t len = strlen(s);

        if (len <= width) {
                put_sanitized(stdout, s, len);
                printf("%*s", (int) (width - len), "");
                return;
        }
        if (width <= 3) {
                put_sanitized(stdout, s, width);
                return;
        }
        if (cut_front) {
                const char *p = s + len - (width - 3);
                size_t skip = 0;

                /* Do not start in the middle of a UTF-8 sequence. */
                while ((p[skip] & 0xc0) == 0x80)
                        skip++;
                fputs("...", stdout);
                put_sanitized(stdout, p + skip, width - 3 - skip);
                printf("%*s", (int) skip, "");
        } else {
                size_t n = width - 3;

                while (n > 0 && (s[n] & 0xc0) == 0x80)
                        n--;
                put_sanitized(stdout, s, n);
                fputs("...", stdout);
                printf("%*s", (int) (width - 3 - n), "");
        }
}

static size_t count_digits(uint64_t v) {
        size_t n = 1;

        while (v >= 10) {
                v /= 10;
                n++;
        }
        return n;
}

/* Off-CPU time as "12.345s", "1.234ms", "567us". */
static const char *wait_format(uint64_t ns, char *buf, size_t size) {
        if (ns >= NSEC_PER_SEC)
                snprintf(buf, size, "%.3fs", (double) ns / 1e9);
        else if (ns >= 1000000)
                snprintf(buf, size, "%.3fms", (double) ns / 1e6);
        else
                snprintf(buf, size, "%.3fus", (double) ns / 1e3);
        return buf;
}

static void print_table(const query_params *q, uint64_t now_ns, const query_result *r) {
        char a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX], d[DURATION_FORMAT_MAX];
        size_t comm_w = strlen("Command"), module_w = strlen("Module"), samples_w = strlen("Samples");
        size_t symbol_w = strlen("Symbol");
        uint64_t from = q->since_ns ? q->since_ns : r->first_ns;
        uint64_t to = q->until_ns ? q->until_ns : now_ns;

        bool offcpu = q->kind == SAMPLE_KIND_OFFCPU;
        char t[32];

        if (offcpu)
                printf("# Off-CPU time: %s  CPUs: %" PRIu32 "\n", wait_format(r->total_samples, t, sizeof t), r->n_cpus);
        else
                printf("# Samples: %" PRIu64 " (lost: %" PRIu64 ")  CPUs: %" PRIu32 "\n",
                       r->total_samples, r->lost, r->n_cpus);
        printf("# Time: %s .. %s (%s)\n",
               time_format_local_decimals(from, 2, a, sizeof(a)) ?: "?",
               time_format_local_decimals(to, 2, b, sizeof(b)) ?: "?",
               duration_format(to > from ? to - from : 0, d, sizeof(d)) ?: "?");

        if (r->n_rows == 0 || r->total_samples == 0) {
                printf(offcpu ? "# no off-CPU time in this time range (is offcpu = on?)\n" :
                                "# no samples in this time range\n");
                return;
        }
        if (!offcpu) {
                uint64_t user = r->user_named + r->user_by_offset + r->user_unknown;

                if (user > 0)
                        printf("# User frames (%" PRIu64 " samples with one as the row): %.1f%% named, %.1f%% by offset "
                               "in their file, %.1f%% unknown\n",
                               user, 100.0 * (double) r->user_named / (double) user,
                               100.0 * (double) r->user_by_offset / (double) user,
                               100.0 * (double) r->user_unknown / (double) user);
        }

        for (size_t i = 0; i < r->n_rows; i++) {
                comm_w = MAX(comm_w, strlen(r->rows[i].comm));
                module_w = MAX(module_w, strlen(r->rows[i].module));
                samples_w = MAX(samples_w, offcpu ? strlen(wait_format(r->rows[i].samples, t, sizeof t)) :
                                                    count_digits(r->rows[i].samples));
                symbol_w = MAX(symbol_w, strlen(r->rows[i].symbol));
        }
        comm_w = MIN(comm_w, (size_t) COMM_COLUMN_MAX);
        module_w = MIN(module_w, (size_t) MODULE_COLUMN_MAX);
        symbol_w = MIN(symbol_w, (size_t) SYMBOL_COLUMN_MAX);

        printf("# Overhead  %*s  ", (int) samples_w, offcpu ? "Waited" : "Samples");
        put_column("Command", comm_w, false);
        fputs("  ", stdout);
        put_column("Module", module_w, false);
        if (q->inlined) {
                fputs("  ", stdout);
                put_column("Symbol", symbol_w + 4, false);      /* the rows' "[k] " is in it */
                fputs("  Inlined\n", stdout);
        } else
                fputs("  Symbol\n", stdout);

        for (size_t i = 0; i < r->n_rows; i++) {
                const query_row *row = &r->rows[i];

                if (offcpu)
                        printf("%9.2f%%  %*s  ", 100.0 * (double) row->samples / (double) r->total_samples,
                               (int) samples_w, wait_format(row->samples, t, sizeof t));
                else
                        printf("%9.2f%%  %*" PRIu64 "  ", 100.0 * (double) row->samples / (double) r->total_samples,
                               (int) samples_w, row->samples);
                put_column(row->comm, comm_w, false);
                fputs("  ", stdout);
                put_column(row->module, module_w, true);
                fputs(row->kernel ? "  [k] " : "  [.] ", stdout);
                if (!q->inlined) {
                        put_sanitized(stdout, row->symbol, SIZE_MAX);
                        fputc('\n', stdout);
                        continue;
                }
                put_column(row->symbol, symbol_w, false);
                /* The chain outermost first: "outer > inner". */
                fputs("  ", stdout);
                for (const char *p = row->inlined ?: "-"; *p;) {
                        size_t len = strcspn(p, ";");

                        put_sanitized(stdout, p, len);
                        p += len;
                        if (*p) {
                                fputs(" > ", stdout);
                                p++;
                        }
                }
                fputc('\n', stdout);
        }
}

/* Folded stacks are split on ';' and the last space: keep both out of names. */
static void put_folded_name(FILE *f, const char *s) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                fputc(c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
                      c < 0x20 || c == 0x7f ? '_' : c, f);
        }
}

/* The unit a stack's samples show under: "[other stacks]" (of any
 * cgroup), "[unknown]" (no known cgroup), "-" (a cgroup in no unit); info
 * is its cgroup's, empty in the first two cases. */
static const char *stack_unit(const query_stack *st, cgroup_info *info) {
        *info = (cgroup_info) {};
        if (query_stack_is_other(st))
                return OTHER_STACKS;
        if (!st->cgroup || !st->cgroup[0])
                return "[unknown]";
        cgroup_info_of(st->cgroup, info);
        return info->unit[0] ? info->unit : "-";
}

void print_folded(FILE *f, const query_result *r) {
        bool by_cgroup = false;

        for (size_t i = 0; i < r->n_stacks && !by_cgroup; i++)
                by_cgroup = r->stacks[i].cgroup;
        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];

                /* Told apart by cgroup: the unit first ("[other stacks]"
                 * are of any). */
                if (by_cgroup) {
                        cgroup_info info;

                        put_folded_name(f, stack_unit(st, &info));
                        fputc(';', f);
                }
                put_folded_name(f, st->comm);
                for (size_t j = 0; j < st->n_frames; j++) {
                        fputc(';', f);
                        put_folded_name(f, st->frames[j]);
                }
                fprintf(f, " %" PRIu64 "\n", st->samples);
        }
}

/* The options query and export share: the window and the filters. 1 if
 * c was one of them, 0 if not, -1 after printing the error. */
int parse_query_option(int c, const char *arg, query_window *w, query_params *q) {
        int64_t v;

        switch (c) {
        case ARG_SINCE:
                w->since = arg;
                return 1;
        case ARG_UNTIL:
                w->until = arg;
                return 1;
        case ARG_PID:
                if (!parse_int(arg, 0, QUERY_PID_MAX, &v)) {
                        print_error("invalid --pid '%s': expected a process id from 0 to %d", arg, QUERY_PID_MAX);
                        return -1;
                }
                q->pid = v;
                return 1;
        case ARG_COMM:
                if (strlen(arg) < 1 || strlen(arg) > QUERY_COMM_MAX) {
                        print_error("invalid --comm '%s': expected a command name of 1 to %d bytes", arg, QUERY_COMM_MAX);
                        return -1;
                }
                q->comm = arg;
                return 1;
        case ARG_CPU:
                if (!parse_int(arg, 0, QUERY_CPU_MAX, &v)) {
                        print_error("invalid --cpu '%s': expected a CPU number from 0 to %d", arg, QUERY_CPU_MAX);
                        return -1;
                }
                q->cpu = (int32_t) v;
                return 1;
        case ARG_DSO:
                if (strlen(arg) < 1 || strlen(arg) > QUERY_DSO_MAX) {
                        print_error("invalid --dso '%s': expected a name or path of 1 to %d bytes", arg, QUERY_DSO_MAX);
                        return -1;
                }
                q->dso = arg;
                return 1;
        case ARG_INLINE:
                q->inlined = true;
                return 1;
        case ARG_UNIT:
                if (strlen(arg) < 1 || strlen(arg) > 256) {
                        print_error("invalid --unit '%s': expected a unit name or glob of 1 to 256 bytes", arg);
                        return -1;
                }
                q->unit = arg;
                return 1;
        case ARG_CGROUP:
                if (strlen(arg) < 1 || strlen(arg) > 4096) {
                        print_error("invalid --cgroup '%s': expected a cgroup path of 1 to 4096 bytes", arg);
                        return -1;
                }
                q->cgroup = arg;
                return 1;
        case ARG_CONTAINER:
                if (strlen(arg) < 1 || strlen(arg) > 64 || strspn(arg, "0123456789abcdef") != strlen(arg)) {
                        print_error("invalid --container '%s': expected 1 to 64 lower-case hex digits of its id", arg);
                        return -1;
                }
                q->container = arg;
                return 1;
        case ARG_TYPE:
                if (strcmp(arg, "cpu") == 0)
                        q->kind = SAMPLE_KIND_CPU;
                else if (strcmp(arg, "offcpu") == 0)
                        q->kind = SAMPLE_KIND_OFFCPU;
                else {
                        print_error("invalid --type '%s': expected cpu or offcpu", arg);
                        return -1;
                }
                return 1;
        case ARG_OFFSETS:
                q->offsets = true;
                return 1;
        case ARG_KERNEL_ONLY:
        case ARG_USER_ONLY:
                if (q->frames != QUERY_FRAMES_ALL) {
                        print_error("--kernel-only and --user-only exclude each other");
                        return -1;
                }
                q->frames = c == ARG_KERNEL_ONLY ? QUERY_FRAMES_KERNEL : QUERY_FRAMES_USER;
                return 1;
        default:
                return 0;
        }
}

int query_fetch_send(const query_params *q, daemon_pending *ret) {
        _cleanup_(json_object_putp) struct json_object *params = query_params_to_json(q);

        if (!params)
                return print_error("out of memory");
        /* more: the answer may come in several messages (doc/protocol.md). */
        return daemon_call_send(PERFSNAP_METHOD_QUERY, params, true, ret);
}

int query_fetch_receive(daemon_pending *call, query_result **ret) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        int r;

        r = daemon_call_receive(call, &answer);
        if (r != 0)
                return r;
        r = query_result_from_json(answer, ret);
        if (r == -ENOMEM)
                return print_error("out of memory");
        if (r < 0)
                return print_error("malformed Query reply from perfsnapd at %s", socket_path());
        return 0;
}

int query_fetch(const query_params *q, query_result **ret) {
        daemon_pending call;
        int r;

        r = query_fetch_send(q, &call);
        return r != 0 ? r : query_fetch_receive(&call, ret);
}

/* Sets q's window from w; 0, or the exit status after printing the error. */
int query_window_apply(const query_window *w, uint64_t now_ns, query_params *q) {
        if (parse_time_option("--since", w->since, now_ns, &q->since_ns) != 0)
                return EXIT_FAILURE;
        if (w->until && parse_time_option("--until", w->until, now_ns, &q->until_ns) != 0)
                return EXIT_FAILURE;
        if ((q->until_ns ? q->until_ns : now_ns) <= q->since_ns)
                return print_error("empty time range: --since '%s' is not before --until '%s'", w->since, w->until ?: "now");
        return 0;
}

static void help_query(void) {
        printf("Usage: perfsnapctl [--socket PATH] query [OPTIONS]\n"
               "\n"
               "Show where the machine spent its CPU time in a time range: the symbols\n"
               "(kernel and user) most often on CPU when a sample was taken.\n"
               "\n"
               "Options:\n"
               "      --since TIME     start of the range (default: %s, i.e. 5 minutes ago)\n"
               "      --until TIME     end of the range, exclusive (default: now)\n"
               "      --pid PID        only samples of this process id\n"
               "      --comm NAME      only samples of tasks with this command name (exact)\n"
               "      --cpu N          only samples taken on CPU N\n"
               "      --dso NAME       only rows of this module (path, file name, or kernel module\n"
               "                       name) and stacks through it; --module NAME is the same\n"
               "      --unit GLOB      only samples of tasks in a systemd unit matching GLOB, or\n"
               "                       below one (--unit 'user@1000.service', --unit system.slice);\n"
               "                       the table gets a Unit column\n"
               "      --cgroup PATH    only samples of tasks in cgroup PATH or below it\n"
               "      --container ID   only samples of tasks in a container whose id starts with ID\n"
               "      --type TYPE      cpu (default): samples of CPU time; offcpu: time threads\n"
               "                       waited off the CPU (offcpu = on in perfsnapd.conf), by the\n"
               "                       stack they left it with; rows and folded stacks weigh\n"
               "                       time (folded: nanoseconds)\n"
               "      --symbol NAME    only samples whose stack goes through function NAME: rows\n"
               "                       by their leaf, folded stacks through it\n"
               "      --callers NAME   the call tree of who called function NAME, up to the\n"
               "                       command, with shares of all samples (perf report -g caller)\n"
               "      --callees NAME   the call tree of what function NAME called, down to the leaf\n"
               "      --sort KEYS      rows by these keys of the leaf, in this order: comm, pid,\n"
               "                       cpu, dso (or module), sym, unit, cgroup, container;\n"
               "                       e.g. --sort comm,dso or --sort unit\n"
               "      --offsets        named frames as symbol+0x<offset in it>: a row per offset\n"
               "      --kernel-only    only kernel frames: rows by the innermost kernel frame,\n"
               "                       stacks without their user part\n"
               "      --user-only      only user frames: rows by the innermost user frame (time\n"
               "                       in the kernel goes to the code that entered it), stacks\n"
               "                       without their kernel part\n"
               "      --inline         also the functions inlined where a user frame is (from\n"
               "                       its file's DWARF): a column of the table, frames of their\n"
               "                       own in folded stacks\n"
               "      --top N          at most N rows; 0 = as many as the daemon allows\n"
               "                       (default: %d for table, 0 for json and folded)\n"
               "      --format FORMAT  table (default), json or folded\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n"
               "\n"
               "TIME is one of:\n"
               "  a duration before now  30s, 5m, 2h, 7d, 1h30m, 500ms (units: ns us ms s m h d w)\n"
               "  a local time           \"2026-11-21\", \"2026-11-21 14:00\", \"2026-11-21 14:00:05.25\"\n"
               "  seconds since 1970     @1763733600, @1763733600.5\n"
               "  now\n",
               DEFAULT_SINCE, DEFAULT_TABLE_TOP);
}

static int row_cmp(const void *x, const void *y) {
        const query_row *a = x, *b = y;
        int d;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        if ((d = strcmp(a->comm, b->comm)) != 0 || (d = strcmp(a->module, b->module)) != 0)
                return d;
        return strcmp(a->symbol, b->symbol);
}

/* --symbol: the rows again, from the leaves of the stacks through the
 * function only (shares stay those of all samples). */
static int rows_through(query_result *r, const char *symbol, uint32_t top) {
        _cleanup_(hashmap_freep) hashmap *idx = NULL;
        query_row *rows = NULL;
        size_t n = 0, alloc = 0, m = 0;
        int k;

        k = hashmap_new(&idx);
        for (size_t i = 0; i < r->n_stacks; i++) {
                query_stack *st = &r->stacks[i];

                /* The stacks not through it are gone (m <= i: what is
                 * kept moves down over what was already looked at). */
                if (k < 0 || !stack_has_symbol(st, symbol)) {
                        query_stack_done(st);
                        continue;
                }
                r->stacks[m++] = *st;
                st = &r->stacks[m - 1];
                const char *leaf = st->n_frames > 0 ? st->frames[st->n_frames - 1] : "[unknown]";
                const char *module = st->n_frames > 0 && st->modules ? r->modules[st->modules[st->n_frames - 1]].name
                                                                      : "[unknown]";
                size_t lc = strlen(st->comm), lm = strlen(module), ll = strlen(leaf);
                _cleanup_free_ char *key = malloc(lc + lm + ll + 3);
                int64_t at;

                if (!key) {
                        k = -ENOMEM;
                        continue;
                }
                memcpy(key, st->comm, lc + 1);
                memcpy(key + lc + 1, module, lm + 1);
                memcpy(key + lc + lm + 2, leaf, ll + 1);
                if (hashmap_get(idx, key, lc + lm + ll + 3, &at) < 0) {
                        k = array_reserve_one((void **) &rows, &alloc, n, sizeof(query_row));
                        if (k >= 0)
                                k = hashmap_put(idx, key, lc + lm + ll + 3, (int64_t) n);
                        if (k < 0)
                                continue;
                        rows[n] = (query_row) {
                                .comm = strdup(st->comm),
                                .module = strdup(module),
                                .symbol = strdup(leaf),
                                .kernel = st->n_kernel > 0,
                        };
                        at = (int64_t) n++;
                        if (!rows[at].comm || !rows[at].module || !rows[at].symbol) {
                                k = -ENOMEM;
                                continue;
                        }
                }
                rows[at].samples += st->samples;
        }
        r->n_stacks = m;
        if (k < 0) {
                query_rows_free(rows, n);
                free(rows);
                return k;
        }
        qsort(rows, n, sizeof(query_row), row_cmp);
        if (top > 0 && n > top) {
                query_rows_free(rows + top, n - top);
                n = top;
        }
        query_rows_free(r->rows, r->n_rows);
        free(r->rows);
        r->rows = rows;
        r->n_rows = n;
        /* Of the daemon's rows, not these. */
        r->user_named = r->user_by_offset = r->user_unknown = 0;
        return 0;
}

/* --sort: the keys of a row, as perf report's --sort. */
enum { SORT_COMM, SORT_PID, SORT_CPU, SORT_DSO, SORT_SYM, SORT_UNIT, SORT_CGROUP, SORT_CONTAINER, SORT_KEYS };
static const char *const sort_names[SORT_KEYS] = { "comm", "pid", "cpu", "dso", "sym", "unit", "cgroup", "container" };
static const char *const sort_headers[SORT_KEYS] = { "Command", "Pid", "CPU", "Module", "Symbol", "Unit", "Cgroup",
                                                     "Container" };

/* "comm,dso" -> keys in order; "module" is "dso". -1 after printing the error. */
static int parse_sort(const char *arg, int *keys, size_t *n) {
        _cleanup_free_ char *copy = strdup(arg);
        char *save = NULL;

        if (!copy)
                return print_error("out of memory"), -1;
        *n = 0;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k = -1;

                for (int i = 0; i < SORT_KEYS; i++)
                        if (strcmp(t, sort_names[i]) == 0 || (i == SORT_DSO && strcmp(t, "module") == 0) ||
                            (i == SORT_SYM && strcmp(t, "symbol") == 0))
                                k = i;
                if (k < 0)
                        return print_error("invalid --sort key '%s': expected comm, pid, cpu, dso (module), sym, "
                                           "unit, cgroup or container", t), -1;
                for (size_t j = 0; j < *n; j++)
                        if (keys[j] == k)
                                return print_error("--sort: key '%s' given twice", t), -1;
                keys[(*n)++] = k;
        }
        if (*n == 0)
                return print_error("--sort: expected keys, e.g. comm,dso,sym"), -1;
        return 0;
}

typedef struct sort_row {
        /* The key values (strings) kept elsewhere; those of pid, cpu,
         * unit and container are in the row (sort_value()). */
        const char *v[SORT_KEYS];
        char num[2][16];                /* pid, cpu as text */
        char unit[CGROUP_UNIT_MAX], container[16];      /* from the cgroup's path */
        bool kernel;
        uint64_t samples;
} sort_row;

/* The unit and container of a row from its cgroup's path: "[unknown]"
 * for samples whose cgroup was not known, "-" for a path without one,
 * "[other stacks]" for those (of any cgroup). */
static void sort_row_cgroup(sort_row *row, const query_stack *st) {
        cgroup_info info;
        const char *unit = stack_unit(st, &info);

        snprintf(row->unit, sizeof row->unit, "%s", unit);
        if (query_stack_is_other(st) || !st->cgroup || !st->cgroup[0]) {
                /* The same label for the cgroup; no container of any. */
                row->v[SORT_CGROUP] = unit;
                snprintf(row->container, sizeof row->container, "%s", query_stack_is_other(st) ? "-" : unit);
        } else {
                row->v[SORT_CGROUP] = st->cgroup;
                /* 12 digits, as docker ps shows them. */
                snprintf(row->container, sizeof row->container, "%.12s", info.container[0] ? info.container : "-");
        }
}

/* A row's value of key: in the row itself for those it formats (the rows
 * move when their array grows), else where v points. */
static const char *sort_value(const sort_row *row, int key) {
        switch (key) {
        case SORT_PID:
                return row->num[0];
        case SORT_CPU:
                return row->num[1];
        case SORT_UNIT:
                return row->unit;
        case SORT_CONTAINER:
                return row->container;
        default:
                return row->v[key];
        }
}

static const int *sort_cmp_keys;
static size_t sort_cmp_n;

static int sort_row_cmp(const void *x, const void *y) {
        const sort_row *a = x, *b = y;

        if (a->samples != b->samples)
                return a->samples > b->samples ? -1 : 1;
        for (size_t i = 0; i < sort_cmp_n; i++) {
                int d = strcmp(sort_value(a, sort_cmp_keys[i]), sort_value(b, sort_cmp_keys[i]));
                if (d != 0)
                        return d;
        }
        return 0;
}

/* The rows of --sort, from the leaves of the answer's stacks. */
static int print_sorted(const query_params *q, uint64_t now_ns, const query_result *r, const int *keys, size_t n_keys,
                        uint32_t top) {
        _cleanup_(hashmap_freep) hashmap *idx = NULL;
        _cleanup_free_ sort_row *rows = NULL;
        size_t n = 0, alloc = 0, width[SORT_KEYS] = {};
        char a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX], t[32];
        bool offcpu = q->kind == SAMPLE_KIND_OFFCPU;
        int k;

        k = hashmap_new(&idx);
        for (size_t i = 0; k >= 0 && i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];
                sort_row row = { .samples = st->samples, .kernel = st->n_kernel > 0 };
                _cleanup_free_ char *key = NULL;
                size_t len = 0;
                int64_t at;

                snprintf(row.num[0], sizeof row.num[0], "%" PRIi64, st->pid);
                snprintf(row.num[1], sizeof row.num[1], "%" PRIi32, st->cpu);
                sort_row_cgroup(&row, st);
                row.v[SORT_COMM] = st->comm;
                row.v[SORT_SYM] = st->n_frames > 0 ? st->frames[st->n_frames - 1] : "[unknown]";
                row.v[SORT_DSO] = st->n_frames > 0 && st->modules ? r->modules[st->modules[st->n_frames - 1]].name
                                                                  : "[unknown]";
                /* The keys' values, each with its NUL, whole. */
                for (size_t j = 0; j < n_keys; j++)
                        len += strlen(sort_value(&row, keys[j])) + 1;
                key = malloc(MAX(len, (size_t) 1));
                if (!key) {
                        k = -ENOMEM;
                        break;
                }
                len = 0;
                for (size_t j = 0; j < n_keys; j++) {
                        size_t l = strlen(sort_value(&row, keys[j])) + 1;

                        memcpy(key + len, sort_value(&row, keys[j]), l);
                        len += l;
                }
                if (hashmap_get(idx, key, len, &at) >= 0) {
                        rows[at].samples += st->samples;
                        continue;
                }
                k = array_reserve_one((void **) &rows, &alloc, n, sizeof(sort_row));
                if (k >= 0)
                        k = hashmap_put(idx, key, len, (int64_t) n);
                if (k < 0)
                        break;
                rows[n] = row;
                n++;
        }
        if (k < 0)
                return print_error("out of memory");
        sort_cmp_keys = keys;
        sort_cmp_n = n_keys;
        qsort(rows, n, sizeof(sort_row), sort_row_cmp);
        if (top > 0 && n > top)
                n = top;

        if (offcpu)
                printf("# Off-CPU time: %s  CPUs: %" PRIu32 "\n", wait_format(r->total_samples, t, sizeof t), r->n_cpus);
        else
                printf("# Samples: %" PRIu64 " (lost: %" PRIu64 ")  CPUs: %" PRIu32 "\n", r->total_samples, r->lost,
                       r->n_cpus);
        printf("# Time: %s .. %s\n", time_format_local_decimals(q->since_ns ?: r->first_ns, 2, a, sizeof a) ?: "?",
               time_format_local_decimals(q->until_ns ?: now_ns, 2, b, sizeof b) ?: "?");
        if (n == 0) {
                printf("# no samples in this time range\n");
                return 0;
        }
        for (size_t j = 0; j < n_keys; j++) {
                width[keys[j]] = strlen(sort_headers[keys[j]]);
                for (size_t i = 0; i < n; i++)
                        width[keys[j]] = MAX(width[keys[j]], strlen(sort_value(&rows[i], keys[j])));
                width[keys[j]] = MIN(width[keys[j]], (size_t) MODULE_COLUMN_MAX);
        }
        printf(offcpu ? "# Overhead     Waited" : "# Overhead    Samples");
        for (size_t j = 0; j < n_keys; j++) {
                fputs("  ", stdout);
                if (j + 1 < n_keys)
                        put_column(sort_headers[keys[j]], width[keys[j]], false);
                else
                        fputs(sort_headers[keys[j]], stdout);
        }
        fputc('\n', stdout);
        for (size_t i = 0; i < n; i++) {
                if (offcpu)
                        printf("%9.2f%%  %9s", 100.0 * (double) rows[i].samples / (double) MAX(r->total_samples, (uint64_t) 1),
                               wait_format(rows[i].samples, t, sizeof t));
                else
                        printf("%9.2f%%  %9" PRIu64, 100.0 * (double) rows[i].samples / (double) MAX(r->total_samples, (uint64_t) 1),
                               rows[i].samples);
                for (size_t j = 0; j < n_keys; j++) {
                        fputs("  ", stdout);
                        if (keys[j] == SORT_SYM)
                                fputs(rows[i].kernel ? "[k] " : "[.] ", stdout);
                        if (j + 1 < n_keys)
                                put_column(sort_value(&rows[i], keys[j]), width[keys[j]], keys[j] == SORT_DSO);
                        else
                                put_sanitized(stdout, sort_value(&rows[i], keys[j]), SIZE_MAX);
                }
                fputc('\n', stdout);
        }
        return 0;
}

int cmd_query(int argc, char **argv) {
        static const struct option options[] = {
                QUERY_OPTIONS,
                { "callers", required_argument, NULL, ARG_CALLERS },
                { "callees", required_argument, NULL, ARG_CALLEES },
                { "symbol", required_argument, NULL, ARG_SYMBOL },
                { "sort",   required_argument, NULL, ARG_SORT },
                { "top",    required_argument, NULL, ARG_TOP },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(json_object_putp) struct json_object *params = NULL, *answer = NULL;
        _cleanup_(query_result_freep) query_result *result = NULL;
        query_window w = { .since = DEFAULT_SINCE };
        const char *format = "table";
        query_params q = QUERY_PARAMS_INIT;
        const char *tree_symbol = NULL, *symbol = NULL;
        int sort_keys[SORT_KEYS];
        size_t n_sort = 0;
        bool top_set = false, callers = false;
        uint64_t now_ns;
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
                        r = parse_top_option(optarg, "rows", &q.top);
                        if (r != 0)
                                return r;
                        top_set = true;
                        break;
                case ARG_FORMAT:
                        if (strcmp(optarg, "table") != 0 && strcmp(optarg, "json") != 0 && strcmp(optarg, "folded") != 0)
                                return print_error("invalid --format '%s': expected table, json or folded", optarg);
                        format = optarg;
                        break;
                case ARG_CALLERS:
                case ARG_CALLEES:
                        if (tree_symbol)
                                return print_error("--callers and --callees exclude each other");
                        tree_symbol = optarg;
                        callers = c == ARG_CALLERS;
                        break;
                case ARG_SYMBOL:
                        symbol = optarg;
                        break;
                case ARG_SORT:
                        if (parse_sort(optarg, sort_keys, &n_sort) < 0)
                                return EXIT_FAILURE;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_query();
                        return finish_output();
                default:
                        return print_option_error(c, argv, "query");
                }
        }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl query --help')", argv[optind]);

        now_ns = clock_ns(CLOCK_REALTIME);
        r = query_window_apply(&w, now_ns, &q);
        if (r != 0)
                return r;

        if ((tree_symbol || symbol) && strcmp(format, "json") == 0)
                return print_error("--callers, --callees and --symbol print a table or folded stacks, not json");
        if (n_sort > 0 && (strcmp(format, "table") != 0 || tree_symbol))
                return print_error("--sort makes a table: not with --format %s, --callers or --callees",
                                   strcmp(format, "table") != 0 ? format : "table");
        if (tree_symbol && strcmp(format, "table") != 0)
                return print_error("--callers and --callees print a call tree: use the table format");
        if (!top_set && strcmp(format, "table") == 0)
                q.top = DEFAULT_TABLE_TOP;
        /* A table of a unit, cgroup or container filter says which unit. */
        if ((q.unit || q.cgroup || q.container) && n_sort == 0 && strcmp(format, "table") == 0 && !tree_symbol) {
                const int keys[] = { SORT_UNIT, SORT_COMM, SORT_DSO, SORT_SYM };

                memcpy(sort_keys, keys, sizeof keys);
                n_sort = ELEMENTSOF(keys);
        }
        q.want_stacks = strcmp(format, "folded") == 0 || tree_symbol || symbol || n_sort > 0;
        /* The tables of --symbol and --sort are made here from the
         * stacks' leaves. */
        q.want_modules = (symbol || n_sort > 0) && strcmp(format, "table") == 0;
        q.packed = tree_symbol || symbol || n_sort > 0;
        for (size_t i = 0; i < n_sort; i++) {
                q.by_pid |= sort_keys[i] == SORT_PID;
                q.by_cpu |= sort_keys[i] == SORT_CPU;
                q.by_cgroup |= sort_keys[i] >= SORT_UNIT;
        }
        /* Folded stacks of a unit, cgroup or container filter start with
         * the sample's unit; json rows and stacks carry their cgroup. */
        if ((q.unit || q.cgroup || q.container) && strcmp(format, "table") != 0)
                q.by_cgroup = true;
        uint32_t top = q.top;
        if (symbol || n_sort > 0)
                q.top = 1;      /* the daemon's rows are not used */

        params = query_params_to_json(&q);
        if (!params)
                return print_error("out of memory");

        /* more: the answer may come in several messages (doc/protocol.md). */
        r = daemon_call(PERFSNAP_METHOD_QUERY, params, true, &answer);
        if (r != 0)
                return r;

        if (strcmp(format, "json") == 0) {
                _cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();

                if (!doc ||
                    json_object_object_add(doc, "query", json_object_get(params)) < 0 ||
                    json_object_object_add(doc, "result", json_object_get(answer)) < 0)
                        return print_error("out of memory");
                r = print_json(doc);
                return r != 0 ? r : finish_output();
        }

        r = query_result_from_json(answer, &result);
        if (r == -ENOMEM)
                return print_error("out of memory");
        if (r < 0)
                return print_error("malformed Query reply from perfsnapd at %s", socket_path());

        if (symbol) {
                r = rows_through(result, symbol, top);
                if (r < 0)
                        return print_error("out of memory");
        }
        if (tree_symbol) {
                r = print_call_tree(stdout, result, tree_symbol, callers);
                if (r == -ENOENT)
                        printf("# no stack in this time range goes through %s\n", tree_symbol);
                else if (r < 0)
                        return print_error("out of memory");
        } else if (n_sort > 0) {
                /* With --symbol too: of the stacks through it. */
                r = print_sorted(&q, now_ns, result, sort_keys, n_sort, top);
                if (r != 0)
                        return r;
        } else if (strcmp(format, "folded") == 0)
                print_folded(stdout, result);
        else
                print_table(&q, now_ns, result);
        return finish_output();
}
