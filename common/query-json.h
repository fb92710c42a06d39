/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* query_params and query_result <-> JSON (json-c), shared by the daemon and
 * perfsnapctl so both sides agree on field names (doc/protocol.md). */

#include "query.h"

struct json_object;

/* Validates and converts io.perfsnap.Query parameters. -EINVAL with a
 * message in *ret_error (static string) naming the offending field.
 * Strings in *ret point into params (keep params alive). */
int query_params_from_json(struct json_object *params, query_params *ret, const char **ret_error);
struct json_object *query_params_to_json(const query_params *q);

/* The reply parameters: {"total":..,"first_ns":..,"last_ns":..,"cpus":..,
 * "lost":..,"rows":[{"comm","module","symbol","kernel","samples"}],
 * "stacks":[{"comm","frames":[...],"samples"}]} */
struct json_object *query_result_to_json(const query_result *r);
int query_result_from_json(struct json_object *obj, query_result **ret);
