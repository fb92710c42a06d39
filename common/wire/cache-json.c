/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The snapshot cache's replies as JSON (cache-json.h). */

#include <errno.h>
#include <json-c/json.h>
#include <string.h>

#include "timeparse.h"
#include "wire/cache-json.h"
#include "wire/protocol.h"

int cache_list_json(const char *cache_dir, const cache_entry *v, size_t n, json_object **ret) {
        json_object *res = json_object_new_object(), *a = json_object_new_array_ext((int) n);

        if (!res || !a) {
                json_object_put(res);
                json_object_put(a);
                return -ENOMEM;
        }
        json_object_object_add(res, "cache_dir", json_object_new_string(cache_dir));
        json_object_object_add(res, "snapshots", a);
        for (size_t i = 0; i < n; i++) {
                const snapshot_info *s = v[i].info;
                json_object *e = json_object_new_object();
                char when[TIME_FORMAT_MAX];

                if (!e) {
                        json_object_put(res);
                        return -ENOMEM;
                }
                json_object_array_add(a, e);
                json_object_object_add(e, "build_id", json_object_new_string(s->build_id));
                json_object_object_add(e, "name", json_object_new_string(s->name));
                json_object_object_add(e, "path", json_object_new_string(s->path));
                json_object_object_add(e, "time", json_object_new_string(
                                time_format_local_decimals(s->time_ns, 2, when, sizeof when) ?: ""));
                json_object_object_add(e, "time_ns", json_object_new_int64((int64_t) s->time_ns));
                json_object_object_add(e, "modules", json_object_new_int64((int64_t) s->n_modules));
                json_object_object_add(e, "text_addr", proto_json_hex(s->text_addr));
                json_object_object_add(e, "size", json_object_new_int64((int64_t) s->size_bytes));
                json_object_object_add(e, "kcore", json_object_new_boolean(s->has_kcore));
                json_object_object_add(e, "reuses", json_object_new_int64((int64_t) v[i].reuses));
                json_object_object_add(e, "id", v[i].id > 0 ? json_object_new_int64(v[i].id) : NULL);
                json_object_object_add(e, "current", json_object_new_boolean(v[i].current));
        }
        *ret = res;
        return 0;
}

json_object *cache_removed_json(const snapshot_info *removed, size_t n) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < n; i++) {
                json_object *o = json_object_new_object();
                json_object_array_add(a, o);
                json_object_object_add(o, "path", json_object_new_string(removed[i].path));
                json_object_object_add(o, "size", json_object_new_int64((int64_t) removed[i].size_bytes));
        }
        return a;
}

int cache_take_json(const char *cache_dir, const cache_take *t, json_object **ret) {
        const snapshot_take_result *tk = t->take;
        const snapshot_info *i = &tk->info;
        json_object *o = json_object_new_object();

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "result", json_object_new_string(tk->reused ? "reused" : "created"));
        json_object_object_add(o, "id", json_object_new_int64(t->id));
        json_object_object_add(o, "path", json_object_new_string(i->path));
        json_object_object_add(o, "build_id", json_object_new_string(i->build_id));
        json_object_object_add(o, "name", json_object_new_string(i->name));
        json_object_object_add(o, "time_ns", json_object_new_int64((int64_t) i->time_ns));
        json_object_object_add(o, "modules", json_object_new_int64((int64_t) i->n_modules));
        json_object_object_add(o, "text_addr", proto_json_hex(i->text_addr));
        json_object_object_add(o, "size", json_object_new_int64((int64_t) i->size_bytes));
        json_object_object_add(o, "kcore", json_object_new_boolean(i->has_kcore));
        json_object_object_add(o, "kcore_error", tk->kcore_error ?
                               json_object_new_string(strerror(tk->kcore_error)) : NULL);
        json_object_object_add(o, "kcore_segments", json_object_new_int64((int64_t) tk->kcore_segments));
        json_object_object_add(o, "kcore_bytes", json_object_new_int64((int64_t) tk->kcore_bytes));
        json_object_object_add(o, "attempts", json_object_new_int64(tk->attempts));
        json_object_object_add(o, "duration_ns", json_object_new_int64((int64_t) t->duration_ns));
        json_object_object_add(o, "reuses", json_object_new_int64((int64_t) t->reuses));
        json_object_object_add(o, "removed", cache_removed_json(t->removed, t->n_removed));
        json_object_object_add(o, "cache_dir", json_object_new_string(cache_dir));
        *ret = o;
        return 0;
}

int cache_prune_json(const char *cache_dir, const snapshot_info *removed, size_t n_removed, size_t n_left,
                     uint64_t size_left, json_object **ret) {
        json_object *o = json_object_new_object();

        if (!o)
                return -ENOMEM;
        json_object_object_add(o, "cache_dir", json_object_new_string(cache_dir));
        json_object_object_add(o, "removed", cache_removed_json(removed, n_removed));
        json_object_object_add(o, "remaining", json_object_new_int64((int64_t) n_left));
        json_object_object_add(o, "remaining_size", json_object_new_int64((int64_t) size_left));
        *ret = o;
        return 0;
}
