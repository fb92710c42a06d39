/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Rendering the layout history (history.h) as the protocol's JSON. The
 * store reads it; this file owns its wire shape. */

#include <errno.h>
#include <json-c/json.h>

#include "wire/history-json.h"
#include "wire/protocol.h"

static json_object *str(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

static json_object *int_if(bool present, int64_t v) {
        return present ? json_object_new_int64(v) : NULL;
}

static json_object *section_json(const history_section *x) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "name", str(x->name));
        json_object_object_add(o, "addr", proto_json_hex(x->addr));
        json_object_object_add(o, "len", json_object_new_int64(x->len));
        json_object_object_add(o, "pgoff", json_object_new_int64(x->pgoff));
        json_object_object_add(o, "len_source", str(x->len_source));
        json_object_object_add(o, "exec", json_object_new_boolean(x->exec));
        return o;
}

static json_object *module_json(const history_module *m, bool with_sections) {
        json_object *o = json_object_new_object(), *a;

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_int64(m->id));
        json_object_object_add(o, "name", str(m->name));
        json_object_object_add(o, "build_id", str(m->build_id));
        json_object_object_add(o, "file", str(m->file));
        json_object_object_add(o, "base", proto_json_hex(m->base));
        json_object_object_add(o, "size", json_object_new_int64(m->size));
        json_object_object_add(o, "loaded_ns", json_object_new_int64(m->loaded_ns));
        json_object_object_add(o, "loaded_how", str(m->loaded_how));
        json_object_object_add(o, "unloaded_ns", int_if(m->unloaded, m->unloaded_ns));
        json_object_object_add(o, "unloaded_how", str(m->unloaded_how));
        json_object_object_add(o, "boot_id", str(m->boot_id));
        json_object_object_add(o, "release", str(m->release));
        if (!with_sections)
                return o;
        a = json_object_new_array_ext((int) m->n_sections);
        if (!a)
                goto fail;
        json_object_object_add(o, "sections", a);
        for (size_t i = 0; i < m->n_sections; i++) {
                json_object *x = section_json(m->sections + i);

                if (!x)
                        goto fail;
                json_object_array_add(a, x);
        }
        return o;
fail:
        json_object_put(o);
        return NULL;
}

static json_object *ksym_json(const history_ksym *k) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_int64(k->id));
        json_object_object_add(o, "name", str(k->name));
        json_object_object_add(o, "addr", proto_json_hex(k->addr));
        json_object_object_add(o, "len", json_object_new_int64(k->len));
        json_object_object_add(o, "type", str(k->type));
        json_object_object_add(o, "prog_id", int_if(k->has_prog_id, k->prog_id));
        json_object_object_add(o, "registered_ns", json_object_new_int64(k->registered_ns));
        json_object_object_add(o, "registered_how", str(k->registered_how));
        json_object_object_add(o, "unregistered_ns", int_if(k->unregistered, k->unregistered_ns));
        json_object_object_add(o, "unregistered_how", str(k->unregistered_how));
        json_object_object_add(o, "boot_id", str(k->boot_id));
        return o;
}

/* A section as a perf MMAP of the kernel's machine (pid -1, as in perf),
 * a dynamic symbol as a PERF_RECORD_KSYMBOL. */
static json_object *record_json(const history_record *x) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        if (x->kind == HISTORY_RECORD_KSYMBOL) {
                json_object_object_add(o, "type", json_object_new_string("ksymbol"));
                json_object_object_add(o, "addr", proto_json_hex(x->addr));
                json_object_object_add(o, "len", json_object_new_int64(x->len));
                json_object_object_add(o, "name", str(x->name));
                json_object_object_add(o, "ksym_type", str(x->ksym_type));
                json_object_object_add(o, "prog_id", int_if(x->has_prog_id, x->prog_id));
                return o;
        }
        json_object_object_add(o, "type", json_object_new_string("section"));
        json_object_object_add(o, "pid", json_object_new_int(-1));
        json_object_object_add(o, "start", proto_json_hex(x->addr));
        json_object_object_add(o, "len", json_object_new_int64(x->len));
        json_object_object_add(o, "pgoff", json_object_new_int64(x->pgoff));
        json_object_object_add(o, "section", str(x->name));
        json_object_object_add(o, "module", str(x->module));
        json_object_object_add(o, "filename", str(x->filename));
        json_object_object_add(o, "build_id", str(x->build_id));
        json_object_object_add(o, "len_source", str(x->len_source));
        json_object_object_add(o, "exec", json_object_new_boolean(x->exec));
        return o;
}

static json_object *event_json(const history_event *e, bool with_records) {
        json_object *o = json_object_new_object(), *k = json_object_new_object(), *a;

        if (!o || !k) {
                json_object_put(o);
                json_object_put(k);
                return NULL;
        }
        json_object_object_add(o, "id", json_object_new_int64(e->id));
        json_object_object_add(o, "time_ns", json_object_new_int64(e->time_ns));
        json_object_object_add(o, "kind", str(e->kind));
        json_object_object_add(o, "module", str(e->module));
        json_object_object_add(o, "module_id", int_if(e->module_id > 0, e->module_id));
        json_object_object_add(o, "ksym", str(e->ksym));
        json_object_object_add(o, "ksym_id", int_if(e->ksym_id > 0, e->ksym_id));
        json_object_object_add(o, "snapshot_id", int_if(e->snapshot_id > 0, e->snapshot_id));
        json_object_object_add(o, "snapshot", str(e->snapshot));
        json_object_object_add(o, "detail", str(e->detail));
        json_object_object_add(o, "kernel", k);
        json_object_object_add(k, "build_id", str(e->kernel_build_id));
        json_object_object_add(k, "text_addr", proto_json_hex(e->kernel_text_addr));
        json_object_object_add(k, "release", str(e->kernel_release));
        json_object_object_add(k, "boot_id", str(e->kernel_boot_id));
        json_object_object_add(o, "n_records", json_object_new_int64(e->n_records));
        if (!with_records)
                return o;
        a = json_object_new_array_ext((int) e->n_listed);
        if (!a)
                goto fail;
        json_object_object_add(o, "records", a);
        for (size_t i = 0; i < e->n_listed; i++) {
                json_object *x = record_json(e->records + i);

                if (!x)
                        goto fail;
                json_object_array_add(a, x);
        }
        return o;
fail:
        json_object_put(o);
        return NULL;
}

typedef json_object *(*element_fn)(const history *h, size_t i);

/* {"KEY": [element(0) .. element(n-1)]}, then "truncated" if h says so. */
static int list_json(const history *h, const char *key, size_t n, element_fn element, json_object **ret) {
        json_object *res = json_object_new_object(), *a = json_object_new_array_ext((int) n);

        if (!res || !a) {
                json_object_put(res);
                json_object_put(a);
                return -ENOMEM;
        }
        json_object_object_add(res, key, a);
        for (size_t i = 0; i < n; i++) {
                json_object *o = element(h, i);

                if (!o) {
                        json_object_put(res);
                        return -ENOMEM;
                }
                json_object_array_add(a, o);
        }
        if (h->truncated)
                json_object_object_add(res, "truncated", json_object_new_boolean(true));
        *ret = res;
        return 0;
}

static json_object *module_at(const history *h, size_t i) {
        return module_json(h->modules + i, h->with_details);
}

static json_object *ksym_at(const history *h, size_t i) {
        return ksym_json(h->ksyms + i);
}

static json_object *event_at(const history *h, size_t i) {
        return event_json(h->events + i, h->with_details);
}

int history_modules_json(const history *h, json_object **ret) {
        return list_json(h, "modules", h->n_modules, module_at, ret);
}

int history_ksyms_json(const history *h, json_object **ret) {
        return list_json(h, "ksyms", h->n_ksyms, ksym_at, ret);
}

int history_events_json(const history *h, json_object **ret) {
        return list_json(h, "events", h->n_events, event_at, ret);
}
