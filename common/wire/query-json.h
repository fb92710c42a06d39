/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* query_params and query_result <-> JSON (json-c), shared by the daemon and
 * perfsnapctl so both sides agree on field names (doc/protocol.md). */

#include <stdbool.h>
#include <stddef.h>

#include "query.h"

struct json_object;

/* Parameter bounds enforced by query_params_from_json(). */
#define QUERY_COMM_MAX 64               /* bytes; the kernel's own comm is at most 15 (TASK_COMM_LEN - 1) */
/* pids are below pid_max, which is at most PID_MAX_LIMIT = 4194304 on
 * 64-bit kernels (include/linux/threads.h). */
#define QUERY_PID_MAX  4194303
#define QUERY_CPU_MAX  8191             /* NR_CPUS is at most 8192 on any architecture */

/* Validates and converts io.perfsnap.Query parameters. -EINVAL with a
 * message in *ret_error naming the offending field, always of the form
 * "<field>: <what was expected>" (e.g. "cpu: expected -1 (any) or a CPU
 * number from 0 to 8191", "frobnicate: unknown parameter"). The message is
 * a static string or a thread-local buffer valid until the next call in the
 * same thread. A JSON null counts as an absent field. params may be NULL
 * (all defaults). Strings in *ret point into params (keep params alive). */
int query_params_from_json(struct json_object *params, query_params *ret, const char **ret_error);
/* since_ns and until_ns always; pid, cpu, comm, top, stacks only when set. NULL on ENOMEM. */
struct json_object *query_params_to_json(const query_params *q);

/* The reply parameters: {"total":..,"first_ns":..,"last_ns":..,"cpus":..,
 * "lost":..,"rows":[{"comm","module","symbol","kernel","samples"}],
 * "stacks":[{"comm","frames":[...],"samples"}]}
 * "stacks" is present only when the result has stacks. */
struct json_object *query_result_to_json(const query_result *r);
/* -EBADMSG if "total" or "rows" is missing or any field has the wrong type
 * or range; "first_ns", "last_ns", "cpus", "lost", "stacks" default to 0/none.
 * Returns a new result (free with query_result_free()). -ENOMEM. */
int query_result_from_json(struct json_object *obj, query_result **ret);

/* Serializes a Query answer as reply messages for the wire (the strings of
 * proto_format_reply()), each at most max_bytes long without its NUL. Every
 * message repeats the scalars (total, first_ns, ...) and carries the next
 * run of rows, then stacks, in order; all but the last have "continues":
 * true. A client concatenates "rows" and "stacks" (query_result_json_merge()).
 * *ret_messages is a NULL-terminated array (free each, then the array).
 * -E2BIG if a single row or stack does not fit in max_bytes. -ENOMEM. */
int query_result_format_replies(const query_result *r, size_t max_bytes, char ***ret_messages, size_t *ret_n);

/* Appends the "rows" and "stacks" of a continued reply's parameters (more)
 * to those of the first (into). -EBADMSG if either has the wrong shape. */
int query_result_json_merge(struct json_object *into, struct json_object *more);
