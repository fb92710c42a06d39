/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Arbitrary JSON as Query parameters and as a Query answer. What is accepted
 * must convert back to JSON and be accepted again with the same values, and
 * an accepted answer must survive splitting into replies and merging. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "wire/protocol.h"
#include "wire/query-json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_params(struct json_object *o) {
        struct json_object *back;
        query_params q, q2;
        const char *error = NULL;

        if (query_params_from_json(o, &q, &error) < 0) {
                if (!error)
                        abort();
                return;
        }
        back = query_params_to_json(&q);
        if (!back || query_params_from_json(back, &q2, &error) < 0)
                abort();
        if (q.since_ns != q2.since_ns || q.until_ns != q2.until_ns || q.pid != q2.pid || q.cpu != q2.cpu ||
            q.top != q2.top || q.want_stacks != q2.want_stacks || !q.comm != !q2.comm ||
            (q.comm && strcmp(q.comm, q2.comm) != 0))
                abort();
        json_object_put(back);
}

static void check_result(struct json_object *o) {
        struct json_object *merged = NULL;
        query_result *r = NULL, *r2 = NULL;
        char **msgs = NULL;
        size_t n = 0;

        if (query_result_from_json(o, &r) < 0)
                return;

        if (query_result_format_replies(r, 512, &msgs, &n) >= 0) {
                for (size_t i = 0; i < n; i++) {
                        struct json_object *p = NULL;

                        if (strlen(msgs[i]) > 512 || proto_reply_parse(msgs[i], NULL, &p, NULL) != 0)
                                abort();
                        if (!merged)
                                merged = p;
                        else {
                                if (query_result_json_merge(merged, p) < 0)
                                        abort();
                                json_object_put(p);
                        }
                        free(msgs[i]);
                }
                free(msgs);
                if (query_result_from_json(merged, &r2) < 0 || r2->n_rows != r->n_rows ||
                    r2->n_stacks != r->n_stacks || r2->total_samples != r->total_samples)
                        abort();
                query_result_free(r2);
                json_object_put(merged);
        }
        query_result_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct json_object *o = NULL;
        char *text;

        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        if (proto_json_parse(text, &o) >= 0) {
                check_params(o);
                check_result(o);
                json_object_put(o);
        }
        free(text);
        return 0;
}
