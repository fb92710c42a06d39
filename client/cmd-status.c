/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl status: the daemon's state, as a table or JSON. */

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "perfsnapctl.h"
#include "timeparse.h"
#include "wire/protocol.h"

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

int cmd_status(int argc, char **argv) {
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
