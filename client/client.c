/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What every perfsnapctl command uses: the connection to perfsnapd and its
 * calls (daemon_call()), error and option handling, output helpers. */

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"
#include "wire/query-json.h"

/* A single reply is bounded by the protocol; a continued answer as a whole
 * by this, so a confused daemon cannot make the client eat all memory. */
#define MAX_ANSWER_BYTES (1024ull * 1024ull * 1024ull)
#define DEFAULT_GROUP "perfsnap"

const char *arg_socket;

static void msgbuf_donep(msgbuf *m) {
        msgbuf_done(m);
}

int print_error(const char *fmt, ...) {
        va_list ap;

        fflush(stdout);
        fputs("perfsnapctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_FAILURE;
}

const char *socket_path(void) {
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

static int connect_daemon(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path)) {
                print_error("socket path too long (at most %zu bytes): %s", sizeof(sa.sun_path) - 1, path);
                return -1;
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                print_error("cannot create a unix socket: %s", strerror(errno));
                return -1;
        }
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int e = errno;

                close(fd);
                if (e == ENOENT || e == ECONNREFUSED)
                        print_error("cannot connect to perfsnapd at %s: %s (is the daemon running? try: systemctl start perfsnapd)",
                             path, strerror(e));
                else if (e == EACCES || e == EPERM) {
                        /* The socket is root:GROUP 0660; its group is the one that may query. */
                        struct stat st;
                        struct group *g = stat(path, &st) >= 0 ? getgrgid(st.st_gid) : NULL;

                        if (g)
                                print_error("permission denied by perfsnapd: only root and members of group '%s' may query (socket %s)",
                                     g->gr_name, path);
                        else
                                print_error("permission denied by perfsnapd: cannot reach %s: %s (only root and members of the group configured in perfsnapd.conf may query)",
                                     path, strerror(e));
                }
                else
                        print_error("cannot connect to perfsnapd at %s: %s", path, strerror(e));
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

static int print_error_reply(const char *error, struct json_object *params) {
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

int daemon_call_send(const char *method, struct json_object *params, bool more, daemon_pending *ret) {
        _cleanup_free_ char *call = NULL;
        int fd;

        fd = connect_daemon(socket_path());
        if (fd < 0)
                return EXIT_FAILURE;
        call = proto_format_call(method, params, more);
        if (!call) {
                close(fd);
                return print_error("out of memory");
        }
        /* If the daemon refuses us it may answer and close before reading
         * the call: a failed send is reported only if no answer follows. */
        *ret = (daemon_pending) { .fd = fd, .send_error = send_all(fd, call, strlen(call) + 1) };
        return 0;
}

int daemon_call_receive(daemon_pending *call, struct json_object **ret) {
        _cleanup_(json_object_putp) struct json_object *answer = NULL;
        _cleanup_(msgbuf_donep) msgbuf mb;
        _cleanup_close_ int fd = TAKE_FD(call->fd);
        const char *path = socket_path();
        uint64_t received = 0;
        int r;

        msgbuf_init(&mb, PERFSNAP_MAX_REPLY_BYTES);
        for (;;) {
                char buf[64 * 1024];
                ssize_t n;

                for (;;) {
                        _cleanup_(json_object_putp) struct json_object *p = NULL;
                        _cleanup_free_ char *msg = NULL, *error = NULL;
                        bool continues;

                        r = msgbuf_next(&mb, &msg);
                        if (r < 0)
                                return print_error("out of memory");
                        if (r == 0)
                                break;

                        r = proto_reply_parse(msg, &error, &p, &continues);
                        if (r < 0)
                                return print_error("malformed reply from perfsnapd at %s", path);
                        if (r > 0)
                                return print_error_reply(error, p);

                        if (!answer)
                                answer = TAKE_PTR(p);
                        else if (query_result_json_merge(answer, p) < 0)
                                return print_error("malformed continued reply from perfsnapd at %s", path);

                        if (!continues) {
                                *ret = TAKE_PTR(answer);
                                return 0;
                        }
                }

                n = recv(fd, buf, sizeof(buf), 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return print_error("failed to read from perfsnapd at %s: %s", path, strerror(errno));
                }
                if (n == 0) {
                        if (call->send_error < 0)
                                return print_error("failed to send to perfsnapd at %s: %s", path,
                                                   strerror(-call->send_error));
                        return print_error("perfsnapd at %s closed the connection before answering", path);
                }
                received += (uint64_t) n;
                if (received > MAX_ANSWER_BYTES)
                        return print_error("answer from perfsnapd exceeds %llu bytes", MAX_ANSWER_BYTES);

                r = msgbuf_feed(&mb, buf, (size_t) n);
                if (r == -EMSGSIZE)
                        return print_error("reply from perfsnapd exceeds %u bytes", PERFSNAP_MAX_REPLY_BYTES);
                if (r < 0)
                        return print_error("out of memory");
        }
}

void daemon_call_abandon(daemon_pending *call) {
        if (call->fd >= 0)
                close(call->fd);
        call->fd = -1;
}

int daemon_call(const char *method, struct json_object *params, bool more, struct json_object **ret) {
        daemon_pending call;
        int r;

        r = daemon_call_send(method, params, more, &call);
        return r != 0 ? r : daemon_call_receive(&call, ret);
}

int print_json(struct json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (!s)
                return print_error("out of memory");
        puts(s);
        return 0;
}

bool parse_int(const char *s, int64_t min, int64_t max, int64_t *ret) {
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

/* The CPU time one sample stands for, from the daemon's sampling
 * frequency; 0 if it does not say. */
uint64_t sample_period_ns(void) {
        _cleanup_(json_object_putp) struct json_object *params = json_object_new_object(), *answer = NULL;
        int64_t hz;

        if (!params || daemon_call(PERFSNAP_METHOD_STATUS, params, false, &answer) != 0)
                return 0;
        hz = json_int_member(answer, "frequency_hz", 0);
        return hz > 0 ? UINT64_C(1000000000) / (uint64_t) hz : 0;
}

int parse_top_option(const char *arg, const char *what, uint32_t *ret) {
        int64_t v;

        if (!parse_int(arg, 0, UINT32_MAX, &v))
                return print_error("invalid --top '%s': expected a number of %s from 0 to %" PRIu32, arg, what, UINT32_MAX);
        *ret = (uint32_t) v;
        return 0;
}

int finish_output(void) {
        if (fflush(stdout) != 0 || ferror(stdout))
                return print_error("failed to write output: %s", strerror(errno));
        return 0;
}

/* getopt's own messages would be prefixed with the command name; report
 * option errors in our format instead. */
int print_option_error(int c, char **argv, const char *command) {
        const char *arg = argv[optind - 1];

        if (c == ':')
                return print_error("option '%s' needs an argument (see 'perfsnapctl %s --help')", arg, command);
        return print_error("unknown option '%s' (see 'perfsnapctl %s --help')", arg, command);
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
                        return print_option_error(c, argv, command);
                }
        if (optind < argc)
                return print_error("unexpected argument '%s' (see 'perfsnapctl %s --help')", argv[optind], command);
        return 0;
}

int parse_time_option(const char *name, const char *value, uint64_t now_ns, uint64_t *ret) {
        int r = time_parse(value, now_ns, ret);

        if (r == -ERANGE)
                return print_error("invalid %s '%s': out of range (before 1970 or too far in the future)", name, value);
        if (r < 0)
                return print_error("invalid %s '%s': expected %s", name, value, TIME_EXPRESSION_HELP);
        return 0;
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
