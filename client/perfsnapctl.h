/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What the command files of perfsnapctl share (client.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "macro.h"

struct json_object;

DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_object *, json_object_put)

#define DEFAULT_SOCKET "/run/perfsnapd/perfsnapd.sock"

extern const char *arg_socket;

/* --socket, else $PERFSNAPD_SOCKET, else DEFAULT_SOCKET. */
const char *socket_path(void);

enum {
        ARG_VERSION = 0x100,
        ARG_SOCKET,
        ARG_SINCE,
        ARG_UNTIL,
        ARG_PID,
        ARG_COMM,
        ARG_CPU,
        ARG_TOP,
        ARG_FORMAT,
        ARG_SECTIONS,
        ARG_RECORDS,
        ARG_LIMIT,
        ARG_MAX_SIZE,
        ARG_MAX_AGE,
        ARG_KERNEL_ONLY,
        ARG_USER_ONLY,
        ARG_DSO,
        ARG_INLINE,
        ARG_OUTPUT,
        ARG_TITLE,
        ARG_CALLERS,
        ARG_CALLEES,
        ARG_SYMBOL,
        ARG_OFFSETS,
        ARG_SORT,
        ARG_WITH_KCORE,
        ARG_NO_KCORE,
        ARG_UNIT,
        ARG_CGROUP,
        ARG_CONTAINER,
        ARG_TYPE,
};

/* Prints "perfsnapctl: MESSAGE" to stderr; returns the exit status 1. */
_printf_(1, 2) int print_error(const char *fmt, ...);
int print_option_error(int c, char **argv, const char *command);
int finish_output(void);
int print_json(struct json_object *o);
/* The string member key of object o, or NULL (no object, no member, not a string). */
const char *json_string_member(struct json_object *o, const char *key);
/* A decimal integer from min to max: digits with an optional '-', no
 * spaces or '+'. */
bool parse_int(const char *s, int64_t min, int64_t max, int64_t *ret);
/* --top N: 0 to UINT32_MAX (what: "rows", "units"); 0, or the exit status
 * after printing the error. */
int parse_top_option(const char *arg, const char *what, uint32_t *ret);
/* The CPU time one sample stands for, from the daemon's sampling
 * frequency (its Status); 0 if it does not say. */
uint64_t sample_period_ns(void);
/* Prints s without control characters. */
void put_sanitized(FILE *f, const char *s, size_t n);
/* s sanitized in a column of width, cut with "..." at its end (or at its
 * front: cut_front, for paths) when longer. */
void put_column(const char *s, size_t width, bool cut_front);
int parse_time_option(const char *name, const char *value, uint64_t now_ns, uint64_t *ret);
/* Calls method; 0 and the reply parameters in *ret, or the exit status
 * after printing the error. */
int daemon_call(const char *method, struct json_object *params, bool more, struct json_object **ret);
/* The same in two steps, so that the daemon works on a call while the
 * caller does something else: send, then receive (which closes the
 * connection) or abandon. Both return 0 or EXIT_FAILURE (printed). */
typedef struct daemon_pending {
        int fd;
        int send_error;
} daemon_pending;
int daemon_call_send(const char *method, struct json_object *params, bool more, daemon_pending *ret);
int daemon_call_receive(daemon_pending *call, struct json_object **ret);
void daemon_call_abandon(daemon_pending *call);

int cmd_query(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_units(int argc, char **argv);

/* The time window of query and export, as given. */
typedef struct query_window {
        const char *since, *until;
} query_window;
struct query_params;
/* The getopt_long() options parse_query_option() takes. */
#define QUERY_OPTIONS                                                           \
        { "since",  required_argument, NULL, ARG_SINCE },                       \
        { "until",  required_argument, NULL, ARG_UNTIL },                       \
        { "pid",    required_argument, NULL, ARG_PID },                         \
        { "comm",   required_argument, NULL, ARG_COMM },                        \
        { "cpu",    required_argument, NULL, ARG_CPU },                         \
        { "kernel-only", no_argument,  NULL, ARG_KERNEL_ONLY },                 \
        { "user-only", no_argument,    NULL, ARG_USER_ONLY },                   \
        { "dso",    required_argument, NULL, ARG_DSO },                         \
        { "module", required_argument, NULL, ARG_DSO },                         \
        { "offsets", no_argument,      NULL, ARG_OFFSETS },                     \
        { "unit",   required_argument, NULL, ARG_UNIT },                        \
        { "cgroup", required_argument, NULL, ARG_CGROUP },                      \
        { "container", required_argument, NULL, ARG_CONTAINER },                \
        { "type",   required_argument, NULL, ARG_TYPE },                        \
        { "inline", no_argument,       NULL, ARG_INLINE }
int parse_query_option(int c, const char *arg, query_window *w, struct query_params *q);
int query_window_apply(const query_window *w, uint64_t now_ns, struct query_params *q);
struct query_result;
/* Calls Query with q: 0 and the parsed answer, or the exit status after
 * printing the error. */
int query_fetch(const struct query_params *q, struct query_result **ret);
/* query_fetch() in two steps (daemon_call_send()). */
int query_fetch_send(const struct query_params *q, daemon_pending *ret);
int query_fetch_receive(daemon_pending *call, struct query_result **ret);
/* Folded stacks ("comm;outer;...;leaf COUNT" lines), as flamegraph.pl reads them. */
void print_folded(FILE *f, const struct query_result *r);
int cmd_status(int argc, char **argv);
int cmd_modules(int argc, char **argv);
int cmd_ksyms(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_rescan(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_cache(int argc, char **argv);

/* "12.3 MiB" (binary units; bytes below 1 KiB). */
void format_bytes(uint64_t v, char *buf, size_t size);
/* Integer member, def if missing or not an integer. */
int64_t json_int_member(struct json_object *o, const char *key, int64_t def);
/* --format table|json; 0, or the exit status after printing the error. */
int parse_format_option(const char *value, bool *ret_json);
/* The options of a command that has no others: --socket, --help, and
 * --format if ret_json is not NULL. 0, -1 after printing the help, or the
 * exit status after printing the error. */
int parse_simple_options(int argc, char **argv, const char *command, void (*help)(void), bool *ret_json);
