/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl: asks perfsnapd over its unix socket (doc/protocol.md) and
 * prints the answer as a perf-report-like table, JSON or folded stacks. */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "build-config.h"
#include "macro.h"
#include "protocol.h"
#include "query-json.h"
#include "timeparse.h"
#include "perfsnapctl.h"

#define DEFAULT_SOCKET "/run/perfsnapd/perfsnapd.sock"
#define DEFAULT_GROUP "perfsnap"
#define DEFAULT_SINCE "5m"
#define DEFAULT_TABLE_TOP 25
/* A single reply is bounded by the protocol; a continued answer as a whole
 * by this, so a confused daemon cannot make the client eat all memory. */
#define MAX_ANSWER_BYTES (1024ull * 1024ull * 1024ull)

/* Column caps for the table: comm is at most 15 bytes from the kernel, but
 * module paths of user mappings can be long. */
#define COMM_COLUMN_MAX 16
#define MODULE_COLUMN_MAX 40

const char *arg_socket;

DEFINE_TRIVIAL_CLEANUP_FUNC(query_result *, query_result_free)

static void msgbuf_donep(msgbuf *m) {
        msgbuf_done(m);
}

int fail(const char *fmt, ...) {
        va_list ap;

        fflush(stdout);
        fputs("perfsnapctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_FAILURE;
}

static const char *socket_path(void) {
        const char *e;

        if (arg_socket)
                return arg_socket;
        e = getenv("PERFSNAPD_SOCKET");
        if (e && *e)
                return e;
        return DEFAULT_SOCKET;
}

/* Names come from processes (any process may set its comm to terminal
 * escape sequences): never print control characters. */
void put_sanitized(FILE *f, const char *s, size_t n) {
        for (size_t i = 0; i < n && s[i]; i++) {
                unsigned char c = (unsigned char) s[i];
                fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
        }
}

/* Prints s in a column of width bytes, left-aligned; longer strings are
 * cut with "..." at the end, or at the start for paths (whose last part
 * is the informative one). */
static void put_column(const char *s, size_t width, bool cut_front) {
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

static bool parse_int(const char *s, int64_t min, int64_t max, int64_t *ret) {
        char *end;
        long long v;

        /* strtoll() would skip spaces and accept a '+'. */
        if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
                return false;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno != 0 || end == s || *end || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static int connect_daemon(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path)) {
                fail("socket path too long (at most %zu bytes): %s", sizeof(sa.sun_path) - 1, path);
                return -1;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                fail("cannot create a unix socket: %s", strerror(errno));
                return -1;
        }
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int e = errno;

                close(fd);
                if (e == ENOENT || e == ECONNREFUSED)
                        fail("cannot connect to perfsnapd at %s: %s (is the daemon running? try: systemctl start perfsnapd)",
                             path, strerror(e));
                else if (e == EACCES || e == EPERM) {
                        /* The socket is root:GROUP 0660; its group is the one that may query. */
                        struct stat st;
                        struct group *g = stat(path, &st) >= 0 ? getgrgid(st.st_gid) : NULL;

                        if (g)
                                fail("permission denied by perfsnapd: only root and members of group '%s' may query (socket %s)",
                                     g->gr_name, path);
                        else
                                fail("permission denied by perfsnapd: cannot reach %s: %s (only root and members of the group configured in perfsnapd.conf may query)",
                                     path, strerror(e));
                }
                else
                        fail("cannot connect to perfsnapd at %s: %s", path, strerror(e));
                return -1;
        }
        return fd;
}

const char *json_string_member(struct json_object *o, const char *key) {
        struct json_object *v;

        if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
                return json_object_get_string(v);
        return NULL;
}

static int fail_error_reply(const char *error, struct json_object *params) {
        const char *message;

        message = json_string_member(params, "message");
        if (strcmp(error, PERFSNAP_ERROR_PERMISSION_DENIED) == 0 && !json_string_member(params, "group") && message) {
                /* Not about the group: a call only root may make. */
                fflush(stdout);
                fputs("perfsnapctl: permission denied by perfsnapd: ", stderr);
                put_sanitized(stderr, message, 4096);
                fputc('\n', stderr);
                return EXIT_FAILURE;
        }
        if (strcmp(error, PERFSNAP_ERROR_PERMISSION_DENIED) == 0) {
                const char *group = json_string_member(params, "group");
                fflush(stdout);
                fputs("perfsnapctl: permission denied by perfsnapd: only root and members of group '", stderr);
                put_sanitized(stderr, group ? group : DEFAULT_GROUP, 64);
                fputs("' may query\n", stderr);
                return EXIT_FAILURE;
        }

        fflush(stdout);
        fputs("perfsnapctl: perfsnapd answered ", stderr);
        put_sanitized(stderr, error, SIZE_MAX);
        if (message) {
                fputs(": ", stderr);
                put_sanitized(stderr, message, 4096);
        }
        fputc('\n', stderr);
        return EXIT_FAILURE;
}

static int send_all(int fd, const char *data, size_t size) {
        while (size > 0) {
                ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                data += n;
                size -= (size_t) n;
        }
        return 0;
}

/* Calls method and collects its answer: the parameters of the reply, with
 * the rows/stacks of continued replies appended. On failure prints the
 * error and returns EXIT_FAILURE. */
int daemon_call(const char *method, struct json_object *params, bool more, struct json_object **ret) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        _cleanup_(msgbuf_donep) msgbuf mb;
        _cleanup_free_ char *call = NULL;
        _cleanup_close_ int fd = -1;
        const char *path = socket_path();
        uint64_t received = 0;
        int r, send_error;

        msgbuf_init(&mb, PERFSNAP_MAX_REPLY_BYTES);

        fd = connect_daemon(path);
        if (fd < 0)
                return EXIT_FAILURE;

        call = proto_format_call(method, params, more);
        if (!call)
                return fail("out of memory");

        /* If the daemon refuses us it may answer and close before reading
         * the call: a failed send is reported only if no answer follows. */
        send_error = send_all(fd, call, strlen(call) + 1);

        for (;;) {
                char buf[64 * 1024];
                ssize_t n;

                for (;;) {
                        _cleanup_(json_object_putp) struct json_object *p = NULL;
                        _cleanup_free_ char *msg = NULL, *error = NULL;
                        bool continues;

                        r = msgbuf_next(&mb, &msg);
                        if (r < 0)
                                return fail("out of memory");
                        if (r == 0)
                                break;

                        r = proto_reply_parse(msg, &error, &p, &continues);
                        if (r < 0)
                                return fail("malformed reply from perfsnapd at %s", path);
                        if (r > 0)
                                return fail_error_reply(error, p);

                        if (!answer)
                                answer = TAKE_PTR(p);
                        else if (query_result_json_merge(answer, p) < 0)
                                return fail("malformed continued reply from perfsnapd at %s", path);

                        if (!continues) {
                                *ret = TAKE_PTR(answer);
                                return 0;
                        }
                }

                n = recv(fd, buf, sizeof(buf), 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return fail("failed to read from perfsnapd at %s: %s", path, strerror(errno));
                }
                if (n == 0) {
                        if (send_error < 0)
                                return fail("failed to send to perfsnapd at %s: %s", path, strerror(-send_error));
                        return fail("perfsnapd at %s closed the connection before answering", path);
                }
                received += (uint64_t) n;
                if (received > MAX_ANSWER_BYTES)
                        return fail("answer from perfsnapd exceeds %llu bytes", MAX_ANSWER_BYTES);

                r = msgbuf_feed(&mb, buf, (size_t) n);
                if (r == -EMSGSIZE)
                        return fail("reply from perfsnapd exceeds %u bytes", PERFSNAP_MAX_REPLY_BYTES);
                if (r < 0)
                        return fail("out of memory");
        }
}

int print_json(struct json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (!s)
                return fail("out of memory");
        puts(s);
        return 0;
}

static size_t count_digits(uint64_t v) {
        size_t n = 1;

        while (v >= 10) {
                v /= 10;
                n++;
        }
        return n;
}

static void print_table(const query_params *q, uint64_t now_ns, const query_result *r) {
        char a[TIME_FORMAT_MAX], b[TIME_FORMAT_MAX], d[DURATION_FORMAT_MAX];
        size_t comm_w = strlen("Command"), module_w = strlen("Module"), samples_w = strlen("Samples");
        uint64_t from = q->since_ns ? q->since_ns : r->first_ns;
        uint64_t to = q->until_ns ? q->until_ns : now_ns;

        printf("# Samples: %" PRIu64 " (lost: %" PRIu64 ")  CPUs: %" PRIu32 "\n",
               r->total_samples, r->lost, r->n_cpus);
        printf("# Time: %s .. %s (%s)\n",
               time_format_local_decimals(from, 2, a, sizeof(a)) ?: "?",
               time_format_local_decimals(to, 2, b, sizeof(b)) ?: "?",
               duration_format(to > from ? to - from : 0, d, sizeof(d)) ?: "?");

        if (r->n_rows == 0 || r->total_samples == 0) {
                printf("# no samples in this time range\n");
                return;
        }

        for (size_t i = 0; i < r->n_rows; i++) {
                comm_w = MAX(comm_w, strlen(r->rows[i].comm));
                module_w = MAX(module_w, strlen(r->rows[i].module));
                samples_w = MAX(samples_w, count_digits(r->rows[i].samples));
        }
        comm_w = MIN(comm_w, (size_t) COMM_COLUMN_MAX);
        module_w = MIN(module_w, (size_t) MODULE_COLUMN_MAX);

        printf("# Overhead  %*s  ", (int) samples_w, "Samples");
        put_column("Command", comm_w, false);
        fputs("  ", stdout);
        put_column("Module", module_w, false);
        fputs("  Symbol\n", stdout);

        for (size_t i = 0; i < r->n_rows; i++) {
                const query_row *row = &r->rows[i];

                printf("%9.2f%%  %*" PRIu64 "  ", 100.0 * (double) row->samples / (double) r->total_samples,
                       (int) samples_w, row->samples);
                put_column(row->comm, comm_w, false);
                fputs("  ", stdout);
                put_column(row->module, module_w, true);
                fputs(row->kernel ? "  [k] " : "  [.] ", stdout);
                put_sanitized(stdout, row->symbol, SIZE_MAX);
                fputc('\n', stdout);
        }
}

/* Folded stacks are split on ';' and the last space: keep both out of names. */
static void put_folded_name(const char *s) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                fputc(c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
                      c < 0x20 || c == 0x7f ? '_' : c, stdout);
        }
}

static void print_folded(const query_result *r) {
        for (size_t i = 0; i < r->n_stacks; i++) {
                const query_stack *st = &r->stacks[i];

                put_folded_name(st->comm);
                for (size_t j = 0; j < st->n_frames; j++) {
                        fputc(';', stdout);
                        put_folded_name(st->frames[j]);
                }
                printf(" %" PRIu64 "\n", st->samples);
        }
}

int finish_output(void) {
        if (fflush(stdout) != 0 || ferror(stdout))
                return fail("failed to write output: %s", strerror(errno));
        return 0;
}


/* getopt's own messages would be prefixed with the command name; report
 * option errors in our format instead. */
int fail_option(int c, char **argv, const char *command) {
        const char *arg = argv[optind - 1];

        if (c == ':')
                return fail("option '%s' needs an argument (see 'perfsnapctl %s --help')", arg, command);
        return fail("unknown option '%s' (see 'perfsnapctl %s --help')", arg, command);
}

int parse_simple_options(int argc, char **argv, const char *command, void (*help)(void), bool *ret_json) {
        /* --format only where ret_json is given: the options end at the NULL name. */
        const struct option options[] = {
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                { ret_json ? "format" : NULL, required_argument, NULL, ARG_FORMAT },
                {}
        };
        int c;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_FORMAT:
                        if (parse_format_option(optarg, ret_json) != 0)
                                return 1;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help();
                        return -1;
                default:
                        return fail_option(c, argv, command);
                }
        if (optind < argc)
                return fail("unexpected argument '%s' (see 'perfsnapctl %s --help')", argv[optind], command);
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

int parse_time_option(const char *name, const char *value, uint64_t now_ns, uint64_t *ret) {
        int r = time_parse(value, now_ns, ret);

        if (r == -ERANGE)
                return fail("invalid %s '%s': out of range (before 1970 or too far in the future)", name, value);
        if (r < 0)
                return fail("invalid %s '%s': expected %s", name, value, TIME_EXPRESSION_HELP);
        return 0;
}

static int cmd_query(int argc, char **argv) {
        static const struct option options[] = {
                { "since",  required_argument, NULL, ARG_SINCE },
                { "until",  required_argument, NULL, ARG_UNTIL },
                { "pid",    required_argument, NULL, ARG_PID },
                { "comm",   required_argument, NULL, ARG_COMM },
                { "cpu",    required_argument, NULL, ARG_CPU },
                { "top",    required_argument, NULL, ARG_TOP },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "help",   no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(json_object_putp) struct json_object *params = NULL, *answer = NULL;
        _cleanup_(query_result_freep) query_result *result = NULL;
        const char *since = DEFAULT_SINCE, *until = NULL, *format = "table";
        query_params q = QUERY_PARAMS_INIT;
        bool top_set = false;
        uint64_t now_ns;
        int64_t v;
        int c, r;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) >= 0)
                switch (c) {
                case ARG_SINCE:
                        since = optarg;
                        break;
                case ARG_UNTIL:
                        until = optarg;
                        break;
                case ARG_PID:
                        if (!parse_int(optarg, 0, QUERY_PID_MAX, &v))
                                return fail("invalid --pid '%s': expected a process id from 0 to %d", optarg, QUERY_PID_MAX);
                        q.pid = v;
                        break;
                case ARG_COMM:
                        if (strlen(optarg) < 1 || strlen(optarg) > QUERY_COMM_MAX)
                                return fail("invalid --comm '%s': expected a command name of 1 to %d bytes", optarg, QUERY_COMM_MAX);
                        q.comm = optarg;
                        break;
                case ARG_CPU:
                        if (!parse_int(optarg, 0, QUERY_CPU_MAX, &v))
                                return fail("invalid --cpu '%s': expected a CPU number from 0 to %d", optarg, QUERY_CPU_MAX);
                        q.cpu = (int32_t) v;
                        break;
                case ARG_TOP:
                        if (!parse_int(optarg, 0, UINT32_MAX, &v))
                                return fail("invalid --top '%s': expected a number of rows from 0 to %" PRIu32, optarg, UINT32_MAX);
                        q.top = (uint32_t) v;
                        top_set = true;
                        break;
                case ARG_FORMAT:
                        if (strcmp(optarg, "table") != 0 && strcmp(optarg, "json") != 0 && strcmp(optarg, "folded") != 0)
                                return fail("invalid --format '%s': expected table, json or folded", optarg);
                        format = optarg;
                        break;
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_query();
                        return finish_output();
                default:
                        return fail_option(c, argv, "query");
                }
        if (optind < argc)
                return fail("unexpected argument '%s' (see 'perfsnapctl query --help')", argv[optind]);

        now_ns = clock_ns(CLOCK_REALTIME);
        if (parse_time_option("--since", since, now_ns, &q.since_ns) != 0)
                return EXIT_FAILURE;
        if (until && parse_time_option("--until", until, now_ns, &q.until_ns) != 0)
                return EXIT_FAILURE;
        if ((q.until_ns ? q.until_ns : now_ns) <= q.since_ns)
                return fail("empty time range: --since '%s' is not before --until '%s'", since, until ?: "now");

        if (!top_set && strcmp(format, "table") == 0)
                q.top = DEFAULT_TABLE_TOP;
        q.want_stacks = strcmp(format, "folded") == 0;

        params = query_params_to_json(&q);
        if (!params)
                return fail("out of memory");

        /* more: the answer may come in several messages (doc/protocol.md). */
        r = daemon_call(PERFSNAP_METHOD_QUERY, params, true, &answer);
        if (r != 0)
                return r;

        if (strcmp(format, "json") == 0) {
                _cleanup_(json_object_putp) struct json_object *doc = json_object_new_object();

                if (!doc ||
                    json_object_object_add(doc, "query", json_object_get(params)) < 0 ||
                    json_object_object_add(doc, "result", json_object_get(answer)) < 0)
                        return fail("out of memory");
                r = print_json(doc);
                return r != 0 ? r : finish_output();
        }

        r = query_result_from_json(answer, &result);
        if (r == -ENOMEM)
                return fail("out of memory");
        if (r < 0)
                return fail("malformed Query reply from perfsnapd at %s", socket_path());

        if (strcmp(format, "folded") == 0)
                print_folded(result);
        else
                print_table(&q, now_ns, result);
        return finish_output();
}

static bool has_suffix(const char *s, const char *suffix, size_t *ret_stem) {
        size_t n = strlen(s), m = strlen(suffix);

        if (n <= m || strcmp(s + n - m, suffix) != 0)
                return false;
        *ret_stem = n - m;
        return true;
}

/* "db_bytes" -> "db size", "uptime_ns" -> "uptime", "db_path" -> "db path". */
static void status_label(const char *key, char *buf, size_t size) {
        size_t stem = strlen(key);
        const char *extra = "";

        if (has_suffix(key, "_ns", &stem) || has_suffix(key, "_hz", &stem))
                ;
        else if (has_suffix(key, "_bytes", &stem))
                extra = " size";
        snprintf(buf, size, "%.*s%s", (int) MIN(stem, (size_t) 64), key, extra);
        for (char *p = buf; *p; p++)
                if (*p == '_')
                        *p = ' ';
}

void format_bytes(uint64_t v, char *buf, size_t size) {
        static const char *units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        double d = (double) v;
        size_t i;

        if (v < 1024) {
                snprintf(buf, size, "%" PRIu64 " B", v);
                return;
        }
        for (i = 0, d /= 1024; d >= 1024 && i < ELEMENTSOF(units) - 1; i++)
                d /= 1024;
        snprintf(buf, size, "%.1f %s", d, units[i]);
}

static void print_status_value(const char *key, struct json_object *v) {
        char buf[64];
        size_t stem;

        switch (json_object_get_type(v)) {
        case json_type_null:
                fputs("-", stdout);
                break;
        case json_type_boolean:
                fputs(json_object_get_boolean(v) ? "yes" : "no", stdout);
                break;
        case json_type_int:
                if (json_object_get_int64(v) >= 0) {
                        uint64_t u = json_object_get_uint64(v);

                        if (has_suffix(key, "_ns", &stem)) {
                                /* Durations and wall-clock times share the unit:
                                 * anything past 2001 is taken as a time. */
                                if (u >= 1000000000ull * NSEC_PER_SEC)
                                        fputs(time_format_local_decimals(u, 0, buf, sizeof(buf)) ?: "?", stdout);
                                else
                                        fputs(duration_format(u, buf, sizeof(buf)) ?: "?", stdout);
                        } else if (has_suffix(key, "_bytes", &stem)) {
                                format_bytes(u, buf, sizeof(buf));
                                fputs(buf, stdout);
                        } else if (has_suffix(key, "_hz", &stem))
                                printf("%" PRIu64 " Hz", u);
                        else
                                printf("%" PRIu64, u);
                } else
                        printf("%" PRId64, json_object_get_int64(v));
                break;
        case json_type_string:
                put_sanitized(stdout, json_object_get_string(v), 4096);
                break;
        default:
                put_sanitized(stdout, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE), 4096);
                break;
        }
}

/* Prints every member, so fields added by a newer daemon show up too. */
static void print_status_object(struct json_object *o, int indent) {
        char label[80];
        size_t width = 0;

        json_object_object_foreach(o, k1, v1) {
                (void) v1;
                status_label(k1, label, sizeof(label));
                width = MAX(width, strlen(label) + 1);
        }

        json_object_object_foreach(o, key, val) {
                status_label(key, label, sizeof(label));
                printf("%*s", indent, "");
                put_sanitized(stdout, label, sizeof(label));
                fputc(':', stdout);
                if (json_object_is_type(val, json_type_object)) {
                        fputc('\n', stdout);
                        print_status_object(val, indent + 2);
                        continue;
                }
                printf("%*s", (int) (width - strlen(label)), "");
                print_status_value(key, val);
                fputc('\n', stdout);
        }
}

static void help_status(void) {
        printf("Usage: perfsnapctl [--socket PATH] status [OPTIONS]\n"
               "\n"
               "Show the state of perfsnapd: version, uptime, sampling setup, sample and\n"
               "lost-sample counts, database size and the running kernel.\n"
               "\n"
               "Options:\n"
               "      --format FORMAT  table (default) or json (the daemon's answer as is)\n"
               "      --socket PATH    connect to PATH instead of the default socket\n"
               "  -h, --help           show this help\n");
}

static int cmd_status(int argc, char **argv) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        struct json_object *proto;
        bool json = false;
        int r;

        r = parse_simple_options(argc, argv, "status", help_status, &json);
        if (r != 0)
                return r < 0 ? finish_output() : r;

        r = daemon_call(PERFSNAP_METHOD_STATUS, NULL, false, &answer);
        if (r != 0)
                return r;

        if (json) {
                r = print_json(answer);
                return r != 0 ? r : finish_output();
        }

        if (json_object_object_get_ex(answer, "protocol", &proto) && json_object_is_type(proto, json_type_int) &&
            json_object_get_int64(proto) != PERFSNAP_PROTOCOL_VERSION)
                fprintf(stderr, "perfsnapctl: warning: perfsnapd speaks protocol %" PRId64 ", this perfsnapctl protocol %d\n",
                        json_object_get_int64(proto), PERFSNAP_PROTOCOL_VERSION);

        print_status_object(answer, 0);
        return finish_output();
}

static void help_main(void) {
        printf("Usage: perfsnapctl [--socket PATH] COMMAND [OPTIONS]\n"
               "\n"
               "Ask the perfsnapd profiler daemon where the machine spent its CPU time.\n"
               "\n"
               "Commands:\n"
               "  query    show the most sampled symbols in a time range\n"
               "  status   show the daemon's state\n"
               "  modules  show kernel modules loaded and unloaded, with their section maps\n"
               "  ksyms    show BPF programs and other dynamic kernel code registered and gone\n"
               "  events   show the journal of kernel code layout changes\n"
               "  rescan   compare /proc/modules and kallsyms with what is tracked now (root)\n"
               "  snapshot snapshot the kernel's code into the build-id cache now (root)\n"
               "  cache    list or prune the kcore snapshots (cache list, cache prune)\n"
               "\n"
               "Options:\n"
               "      --socket PATH  connect to PATH (default: $PERFSNAPD_SOCKET, else\n"
               "                     %s)\n"
               "  -h, --help         show this help\n"
               "      --version      show the version\n"
               "\n"
               "Run 'perfsnapctl COMMAND --help' for the options of a command.\n"
               "Errors exit with status 1.\n",
               DEFAULT_SOCKET);
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket",  required_argument, NULL, ARG_SOCKET },
                { "help",    no_argument,       NULL, 'h' },
                { "version", no_argument,       NULL, ARG_VERSION },
                {}
        };
        int c;

        opterr = 0;
        /* '+': stop at the command; its options are parsed by the command. */
        while ((c = getopt_long(argc, argv, "+:h", options, NULL)) >= 0)
                switch (c) {
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_main();
                        return finish_output();
                case ARG_VERSION:
                        printf("perfsnapctl %s (protocol %d)\n", PACKAGE_VERSION, PERFSNAP_PROTOCOL_VERSION);
                        return finish_output();
                default:
                        if (c == ':')
                                return fail("option '%s' needs an argument (see 'perfsnapctl --help')", argv[optind - 1]);
                        return fail("unknown option '%s' (see 'perfsnapctl --help')", argv[optind - 1]);
                }

        if (optind >= argc)
                return fail("no command given (see 'perfsnapctl --help')");

        argc -= optind;
        argv += optind;
        if (strcmp(argv[0], "query") == 0)
                return cmd_query(argc, argv);
        if (strcmp(argv[0], "status") == 0)
                return cmd_status(argc, argv);
        if (strcmp(argv[0], "modules") == 0)
                return cmd_modules(argc, argv);
        if (strcmp(argv[0], "ksyms") == 0)
                return cmd_ksyms(argc, argv);
        if (strcmp(argv[0], "events") == 0)
                return cmd_events(argc, argv);
        if (strcmp(argv[0], "rescan") == 0)
                return cmd_rescan(argc, argv);
        if (streq(argv[0], "snapshot"))
                return cmd_snapshot(argc, argv);
        if (streq(argv[0], "cache"))
                return cmd_cache(argc, argv);
        return fail("unknown command '%s' (see 'perfsnapctl --help')", argv[0]);
}
