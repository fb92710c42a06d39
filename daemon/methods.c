/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The method table (methods.h) and the handlers that answer calls on the
 * worker threads: Query, Status's stored counters, Modules, Events, Ksyms
 * and CacheList. Each reads through the thread's own read-only
 * connection; the JSON is the wire library's. */

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/snapshot.h"
#include "macro.h"
#include "methods.h"
#include "timeparse.h"
#include "wire/cache-json.h"
#include "wire/history-json.h"
#include "wire/protocol.h"
#include "wire/query-json.h"
#include "wire/status-json.h"

/* The records of one event per module section: cap them so that an answer
 * stays well below PERFSNAP_MAX_REPLY_BYTES (a record is ~250 bytes). */
#define EVENTS_MAX_RECORDS 40000

char **method_single_reply(char *msg) {
        char **v;

        if (!msg)
                return NULL;
        v = calloc(2, sizeof *v);
        if (!v) {
                free(msg);
                return NULL;
        }
        v[0] = msg;
        return v;
}

static char **no_database(const method_job *j) {
        char msg[256];

        snprintf(msg, sizeof msg, "cannot open the database %s: %s", j->db_path, strerror(-j->store_error));
        return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
}

static char **run_query(method_job *j) {
        query_params q = QUERY_PARAMS_INIT;
        query_result *res = NULL;
        const char *why = NULL;
        char msg[256], **replies = NULL;
        size_t n = 0;
        int r;

        r = query_params_from_json(j->params, &q, &why);
        if (r < 0)
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER, why ?: "invalid parameters"));
        if (!j->store)
                return no_database(j);
        q.symbols_dir = j->cache_dir;
        if (j->query_timeout_ns)
                q.deadline_ns = clock_ns(CLOCK_MONOTONIC) + j->query_timeout_ns;
        r = store_query(j->store, &q, j->max_rows, j->max_stacks, &res);
        /* A query's transient heap goes back to the system, not to the
         * daemon's high-water mark (once no other query waits: the parts
         * of an export come one after another); a stopped query's too. */
        j->trim = true;
        if (r < 0) {
                if (r == -ETIME) {
                        char t[32];

                        duration_format(j->query_timeout_ns, t, sizeof t);
                        snprintf(msg, sizeof msg,
                                 "the query was stopped after query_timeout (%s): ask for a shorter window or fewer "
                                 "stacks, or raise query_timeout in the daemon's configuration", t);
                        return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER, msg));
                }
                if (r == -ERANGE)
                        return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER,
                                "too many distinct stacks per process, CPU or time slot in this window for one answer: "
                                "ask for a shorter window"));
                snprintf(msg, sizeof msg, "query failed: %s", strerror(-r));
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
        }
        r = query_result_format_replies(res, PERFSNAP_MAX_REPLY_BYTES, &replies, &n);
        if (r == -E2BIG && res->names) {
                /* The names table alone does not fit in the first reply:
                 * the stacks with their names, split over replies. */
                query_result_unpack(res);
                r = query_result_format_replies(res, PERFSNAP_MAX_REPLY_BYTES, &replies, &n);
        }
        query_result_free(res);
        if (r == -E2BIG)
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER, "a single row does not fit in one reply"));
        if (r < 0)
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "out of memory"));
        if (n > 1 && !j->more) {
                for (size_t i = 0; i < n; i++)
                        free(replies[i]);
                free(replies);
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER,
                                                 "answer too large for one reply: call with more, or lower top"));
        }
        return replies;
}

/* The live fields the loop filled, plus the stored counters. */
static char **run_status(method_job *j) {
        store_stats st = {};

        if (j->store && store_get_stats(j->store, &st) >= 0)
                status_stored_json(&(status_stored) {
                                .samples = st.samples,
                                .lost = st.lost,
                                .db_bytes = st.db_bytes,
                                .first_ns = st.first_ns,
                                .last_ns = st.last_ns,
                        }, j->params);
        return method_single_reply(proto_format_reply(j->params, false));
}

/* Optional parameters of Modules, Events and Ksyms; false with *why set on a
 * wrong type or a value of 2^63 or more. */
static bool get_u64(json_object *params, const char *key, uint64_t *v, const char **why) {
        json_object *o;

        if (!params || !json_object_object_get_ex(params, key, &o))
                return true;
        if (proto_json_u64(o, INT64_MAX, v) < 0) {
                *why = key;
                return false;
        }
        return true;
}

static bool get_bool(json_object *params, const char *key, bool *v, const char **why) {
        json_object *o;

        if (!params || !json_object_object_get_ex(params, key, &o))
                return true;
        if (!json_object_is_type(o, json_type_boolean)) {
                *why = key;
                return false;
        }
        *v = json_object_get_boolean(o);
        return true;
}

typedef enum history_list { LIST_MODULES, LIST_EVENTS, LIST_KSYMS } history_list;

static char **run_history(method_job *j, history_list what) {
        uint64_t since = 0, limit = 0;
        bool flag = false;
        const char *why = NULL;
        json_object *res = NULL;
        char msg[256], *reply;
        history h = {};
        int r;

        if (!get_u64(j->params, "since_ns", &since, &why) || !get_u64(j->params, "limit", &limit, &why) ||
            (what != LIST_KSYMS && !get_bool(j->params, what == LIST_MODULES ? "sections" : "records", &flag, &why))) {
                snprintf(msg, sizeof msg, "parameter \"%s\" is not %s", why,
                         streq(why, "since_ns") || streq(why, "limit") ? "an integer in [0, 2^63)" : "a boolean");
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER, msg));
        }
        if (!j->store)
                return no_database(j);
        limit = MIN(limit ?: j->max_rows, (uint64_t) j->max_rows);
        if (what == LIST_MODULES)
                r = store_list_modules(j->store, since, flag, (uint32_t) limit, &h);
        else if (what == LIST_KSYMS)
                r = store_list_ksyms(j->store, since, (uint32_t) limit, &h);
        else
                r = store_list_events(j->store, since, flag, (uint32_t) limit, EVENTS_MAX_RECORDS, &h);
        if (r >= 0) {
                r = what == LIST_MODULES ? history_modules_json(&h, &res) :
                    what == LIST_KSYMS ? history_ksyms_json(&h, &res) : history_events_json(&h, &res);
                history_done(&h);
        }
        if (r < 0) {
                snprintf(msg, sizeof msg, "reading the journal failed: %s", strerror(-r));
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
        }
        reply = proto_format_reply(res, false);
        json_object_put(res);
        if (reply && strlen(reply) > PERFSNAP_MAX_REPLY_BYTES) {
                free(reply);
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INVALID_PARAMETER,
                                                 "answer too large for one reply: use a later since or a limit"));
        }
        return method_single_reply(reply);
}

static char **run_modules(method_job *j) {
        return run_history(j, LIST_MODULES);
}

static char **run_events(method_job *j) {
        return run_history(j, LIST_EVENTS);
}

static char **run_ksyms(method_job *j) {
        return run_history(j, LIST_KSYMS);
}

/* The snapshots in the cache directory (the truth, whoever made them),
 * with the reuse counts the database has for them. */
static char **run_cache_list(method_job *j) {
        const char *current = NULL;
        snapshot_info *v = NULL;
        cache_entry *entries;
        json_object *res, *o;
        char msg[256], *reply;
        size_t n = 0;
        int r;

        if (!j->cache_dir || !j->cache_dir[0])
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "snapshots are off (cache_dir is empty)"));
        if (json_object_object_get_ex(j->params, "current", &o))
                current = json_object_get_string(o);
        r = snapshot_list(j->cache_dir, &v, &n);
        if (r < 0) {
                snprintf(msg, sizeof msg, "cannot read the cache %s: %s", j->cache_dir, strerror(-r));
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, msg));
        }
        entries = n > 0 ? calloc(n, sizeof *entries) : NULL;
        if (n > 0 && !entries) {
                snapshot_infos_free(v, n);
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "out of memory"));
        }
        for (size_t i = 0; i < n; i++) {
                entries[i] = (cache_entry) { .info = v + i, .current = current && streq(current, v[i].path) };
                if (j->store)
                        (void) store_get_snapshot(j->store, v[i].build_id, v[i].name, &entries[i].id, &entries[i].reuses);
        }
        r = cache_list_json(j->cache_dir, entries, n, &res);
        free(entries);
        if (r < 0) {
                snapshot_infos_free(v, n);
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "out of memory"));
        }
        snapshot_infos_free(v, n);
        reply = proto_format_reply(res, false);
        json_object_put(res);
        if (reply && strlen(reply) > PERFSNAP_MAX_REPLY_BYTES) {
                free(reply);
                return method_single_reply(proto_format_error_message(PERFSNAP_ERROR_INTERNAL, "too many snapshots for one reply: prune the cache"));
        }
        return method_single_reply(reply);
}

static const method methods[] = {
        { PERFSNAP_METHOD_QUERY,       false, NULL, METHOD_QUERY_THREAD,  METHOD_FILL_NONE,   run_query, METHOD_FRESH_SAMPLES },
        { PERFSNAP_METHOD_STATUS,      false, NULL, METHOD_STATUS_THREAD, METHOD_FILL_STATUS, run_status, METHOD_FRESH_NO },
        { PERFSNAP_METHOD_MODULES,     false, NULL, METHOD_QUERY_THREAD,  METHOD_FILL_NONE,   run_modules, METHOD_FRESH_NO },
        { PERFSNAP_METHOD_EVENTS,      false, NULL, METHOD_QUERY_THREAD,  METHOD_FILL_NONE,   run_events, METHOD_FRESH_DRAIN },
        { PERFSNAP_METHOD_KSYMS,       false, NULL, METHOD_QUERY_THREAD,  METHOD_FILL_NONE,   run_ksyms, METHOD_FRESH_DRAIN },
        { PERFSNAP_METHOD_CACHE_LIST,  false, NULL, METHOD_QUERY_THREAD,  METHOD_FILL_CACHE,  run_cache_list, METHOD_FRESH_NO },
        { PERFSNAP_METHOD_RESCAN,      true,  "request a rescan",   METHOD_LOOP,       METHOD_FILL_NONE, NULL, METHOD_FRESH_NO },
        { PERFSNAP_METHOD_SNAPSHOT,    true,  "request a snapshot", METHOD_LOOP_LATER, METHOD_FILL_NONE, NULL, METHOD_FRESH_NO },
        { PERFSNAP_METHOD_CACHE_PRUNE, true,  "prune the cache",    METHOD_LOOP_LATER, METHOD_FILL_NONE, NULL, METHOD_FRESH_NO },
};

const method *method_lookup(const char *name) {
        if (!name)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (streq(methods[i].name, name))
                        return methods + i;
        return NULL;
}

const method *method_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(methods);
        return methods;
}

bool method_allowed(const method *m, uid_t uid) {
        return m && (!m->root_only || uid == 0);
}
