/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Freeing the layout history answers (history.h): made by the store,
 * rendered by the wire, linked by both. */

#include <stdlib.h>
#include <string.h>

#include "history.h"

static void module_done(history_module *m) {
        free(m->name);
        free(m->build_id);
        free(m->file);
        free(m->loaded_how);
        free(m->unloaded_how);
        free(m->boot_id);
        free(m->release);
        for (size_t i = 0; i < m->n_sections; i++) {
                free(m->sections[i].name);
                free(m->sections[i].len_source);
        }
        free(m->sections);
}

static void ksym_done(history_ksym *k) {
        free(k->name);
        free(k->type);
        free(k->registered_how);
        free(k->unregistered_how);
        free(k->boot_id);
}

static void record_done(history_record *x) {
        free(x->name);
        free(x->module);
        free(x->filename);
        free(x->build_id);
        free(x->len_source);
        free(x->ksym_type);
}

static void event_done(history_event *e) {
        free(e->kind);
        free(e->module);
        free(e->ksym);
        free(e->snapshot);
        free(e->detail);
        free(e->kernel_build_id);
        free(e->kernel_release);
        free(e->kernel_boot_id);
        for (size_t i = 0; i < e->n_listed; i++)
                record_done(e->records + i);
        free(e->records);
}

void history_done(history *h) {
        if (!h)
                return;
        for (size_t i = 0; i < h->n_modules; i++)
                module_done(h->modules + i);
        for (size_t i = 0; i < h->n_ksyms; i++)
                ksym_done(h->ksyms + i);
        for (size_t i = 0; i < h->n_events; i++)
                event_done(h->events + i);
        free(h->modules);
        free(h->ksyms);
        free(h->events);
        memset(h, 0, sizeof *h);
}
