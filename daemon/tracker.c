/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Keeping the layout in step with the kernel's modules: uevents, rescans
 * of proc/modules and the journal entries they make (tracker.h); dynamic
 * symbols are in tracker-ksyms.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "kernel/modules.h"
#include "log.h"
#include "macro.h"
#include "store/store.h"
#include "timeparse.h"
#include "tracker-private.h"

/* An unloaded module's tables are kept this long for samples still in the
 * ring buffers (drained at least every drain_interval, 60 s at most). */
#define UNLOADED_KEEP_NS (300 * NSEC_PER_SEC)

uint64_t tracker_wall_from_mono(uint64_t mono) {
        return (uint64_t) ((int64_t) mono + clock_mono_to_wall_ns());
}

static void on_read_syms(evutil_socket_t fd, short what, void *userdata);

int tracker_new(struct event_base *base, store *st, layout *l, ingest *in, const char *root, tracker **ret) {
        tracker *t = calloc(1, sizeof *t);

        if (!t)
                return -ENOMEM;
        t->store = st;
        t->layout = l;
        t->in = in;
        t->root = strdup(root ?: "/");
        t->syms_ev = event_new(base, -1, 0, on_read_syms, t);
        t->ksym_rescan_ev = event_new(base, -1, 0, tracker_on_ksym_rescan, t);
        if (!t->root || !t->syms_ev || !t->ksym_rescan_ev) {
                tracker_free(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

tracker *tracker_free(tracker *t) {
        if (!t)
                return NULL;
        if (t->syms_ev)
                event_free(t->syms_ev);
        if (t->ksym_rescan_ev)
                event_free(t->ksym_rescan_ev);
        free(t->before_sampling);
        free(t->root);
        free(t);
        return NULL;
}

int tracker_read_before_sampling(tracker *t) {
        size_t skipped = 0;
        int r;

        free(t->before_sampling);
        t->before_sampling = NULL;
        t->n_before_sampling = 0;
        r = proc_modules_load(t->root, &t->before_sampling, &t->n_before_sampling, &skipped);
        return r == -ENOENT ? 0 : r;
}

static bool live_before_sampling(const tracker *t, const proc_module *pm) {
        for (size_t i = 0; i < t->n_before_sampling; i++) {
                const proc_module *b = &t->before_sampling[i];

                if (streq(b->name, pm->name) && b->base == pm->base && b->state == MODULE_STATE_LIVE)
                        return true;
        }
        return false;
}

const tracker_stats *tracker_get_stats(const tracker *t) {
        return &t->stats;
}

/* Symbols of modules added since the last read. kallsyms is read after
 * the change is journaled: reading it costs tens of ms (the kernel formats
 * every line), and the ELF symbols cover the meantime. */
static void on_read_syms(evutil_socket_t fd, short what, void *userdata) {
        tracker *t = userdata;
        layout *l = t->layout;
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_full_file_at(t->root, "proc/kallsyms", KALLSYMS_READ_MAX_BYTES, &text, &size);
        if (r < 0) {
                log_warning_errno(r, "Failed to read kallsyms for new modules: %m");
                return;
        }
        for (size_t i = 0; i < layout_n_modules(l); i++) {
                layout_module *m = layout_get_module(l, i);
                kallsyms *k = NULL;

                if (m->syms || m->syms_in_kernel_table || m->unloaded_ns != LAYOUT_TIME_MAX)
                        continue;
                r = kallsyms_parse_module(text, size, m->name, &k);
                if (r < 0) {
                        log_warning_errno(r, "Failed to parse the kallsyms lines of module %s: %m", m->name);
                        continue;
                }
                if (kallsyms_count(k) == 0) {
                        kallsyms_free(k);
                        log_debug("No kallsyms lines for module %s.", m->name);
                        continue;
                }
                log_debug("Module %s: %zu symbols from kallsyms.", m->name, kallsyms_count(k));
                layout_module_set_syms(l, m, k);
        }
}

static int find_proc_module(const proc_module *pm, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (streq(pm[i].name, name))
                        return (int) i;
        return -1;
}

static int read_coresize(const char *root, const char *name, uint64_t *ret) {
        _cleanup_free_ char *text = NULL, *rel = NULL;
        unsigned long long v;
        char *end;
        int r;

        if (asprintf(&rel, "sys/module/%s/coresize", name) < 0)
                return -ENOMEM;
        r = read_full_file_at(root, rel, 64, &text, NULL);
        if (r < 0)
                return r;
        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno || end == text || (*end && *end != '\n'))
                return -EBADMSG;
        *ret = v;
        return 0;
}

/* Reads what the kernel says of a module that is in proc/modules now. */
static layout_module *build_module(tracker *t, const proc_module *pm, layout_source how) {
        const char *release = ingest_kernel(t->in)->release;
        _cleanup_free_ char *path = NULL;
        uint64_t coresize = 0;
        layout_module *m;
        int r;

        m = layout_module_new(pm->name);
        if (!m)
                return NULL;
        m->base = pm->base;
        m->size = pm->size;
        m->loaded_how = how;
        m->init_running = pm->state == MODULE_STATE_LOADING;

        /* proc/modules counts the init layout in the size until the kernel
         * has freed it, which is after the add uevent; the core layout's
         * own size is in sysfs. */
        if (read_coresize(t->root, pm->name, &coresize) >= 0 && coresize > 0 && coresize <= pm->size)
                m->size = coresize;

        r = module_sections_read(t->root, pm->name, &m->sections, &m->n_sections);
        if (r < 0)
                log_warning_errno(r, "Module %s: failed to read its section map from sys/module/%s/sections: %m",
                                  pm->name, pm->name);
        r = notes_module_build_id(t->root, pm->name, m->build_id);
        if (r < 0) {
                log_debug_errno(r, "Module %s: no build-id: %m", pm->name);
                m->build_id[0] = 0;
        }

        if (release[0] && m->n_sections > 0) {
                r = module_find_file(t->root, release, pm->name, &path);
                if (r >= 0)
                        r = module_elf_apply(path, m->build_id, m->sections, m->n_sections, &m->elf_syms, &m->n_elf_syms);
                if (r >= 0)
                        m->file = TAKE_PTR(path);
                else
                        log_debug_errno(r, "Module %s: section lengths from the next section's start (%s%s): %m",
                                        pm->name, path ?: "no file in modules.dep",
                                        r == -ESTALE ? " is another build" : "");
        }
        module_sections_bound(m->sections, m->n_sections, m->base, m->size);
        return m;
}

static int journal(tracker *t, const char *kind, int64_t module_id, int64_t ksym_id, int64_t snapshot_id,
                   const char *detail, uint64_t wall) {
        layout *l = t->layout;
        _cleanup_free_ int64_t *mods = NULL, *ksyms = NULL;
        size_t n_mods = 0, n_ksyms = 0;
        int r;

        mods = calloc(layout_n_modules(l) + 1, sizeof *mods);
        ksyms = calloc(layout_n_live_ksyms(l) + 1, sizeof *ksyms);
        if (!mods || !ksyms)
                return -ENOMEM;
        for (size_t i = 0; i < layout_n_modules(l); i++) {
                const layout_module *x = layout_get_module(l, i);
                if (x->unloaded_ns == LAYOUT_TIME_MAX && x->id > 0)
                        mods[n_mods++] = x->id;
        }
        for (size_t i = 0; i < layout_n_live_ksyms(l); i++) {
                const layout_ksym *x = layout_get_live_ksym(l, i);
                if (x->id > 0)
                        ksyms[n_ksyms++] = x->id;
        }
        r = store_add_event(t->store, &(store_event) {
                        .time_ns = wall,
                        .boot_id = ingest_boot_id(t->in),
                        .kind = kind,
                        .module_id = module_id,
                        .ksym_id = ksym_id,
                        .snapshot_id = snapshot_id,
                        .detail = detail,
                        .live_modules = mods,
                        .n_live_modules = n_mods,
                        .live_ksyms = ksyms,
                        .n_live_ksyms = n_ksyms,
                }, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to journal the %s event: %m", kind);
        t->stats.events++;
        return 0;
}

int tracker_journal(tracker *t, const char *kind, int64_t module_id, int64_t ksym_id, const char *detail, uint64_t wall) {
        return journal(t, kind, module_id, ksym_id, 0, detail, wall);
}

int tracker_journal_snapshot(tracker *t, const char *kind, int64_t snapshot_id, const char *detail, uint64_t wall) {
        return journal(t, kind, 0, 0, snapshot_id, detail, wall);
}

void tracker_set_layout_cb(tracker *t, tracker_layout_cb cb, void *userdata) {
        t->layout_cb = cb;
        t->layout_userdata = userdata;
}

/* Journals a module load or unload and tells the layout listener (the
 * snapshotter) the kernel's code layout changed. */
static void journal_module_change(tracker *t, const char *kind, int64_t module_id, const char *detail, uint64_t wall) {
        (void) tracker_journal(t, kind, module_id, 0, detail, wall);
        if (t->layout_cb)
                t->layout_cb(wall, t->layout_userdata);
}

static int record_module(tracker *t, layout_module *m, uint64_t wall) {
        _cleanup_free_ store_section *secs = NULL;
        int r;

        if (m->n_sections > 0) {
                secs = calloc(m->n_sections, sizeof *secs);
                if (!secs)
                        return log_oom();
        }
        for (size_t i = 0; i < m->n_sections; i++)
                secs[i] = (store_section) {
                        .name = m->sections[i].name,
                        .addr = m->sections[i].addr,
                        .len = m->sections[i].len,
                        .pgoff = m->sections[i].pgoff,
                        .len_source = section_len_source_to_string(m->sections[i].len_source),
                        .exec = m->sections[i].exec,
                };
        r = store_add_module(t->store, &(store_module) {
                        .boot_id = ingest_boot_id(t->in),
                        .name = m->name,
                        .build_id = m->build_id,
                        .file = m->file,
                        .base = m->base,
                        .size = m->size,
                        .loaded_ns = wall,
                        .loaded_how = layout_source_to_string(m->loaded_how),
                        .sections = secs,
                        .n_sections = m->n_sections,
                }, &m->id);
        if (r < 0)
                return log_error_errno(r, "Failed to record module %s in the database: %m", m->name);
        return 0;
}

static int add_module(tracker *t, const proc_module *pm, layout_source how, const char *detail, uint64_t mono) {
        layout *l = t->layout;
        uint64_t wall = tracker_wall_from_mono(mono);
        layout_module *m;
        int r;

        m = build_module(t, pm, how);
        if (!m)
                return log_oom();
        r = layout_add_module(l, m, mono, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to add module %s to the layout: %m", pm->name);
        (void) record_module(t, m, wall);
        journal_module_change(t, "module-add", m->id, detail, wall);
        t->stats.modules_added++;
        /* Its address only at debug level: kernel addresses defeat KASLR. */
        log_info("Module %s loaded (%llu bytes, %zu sections%s%s, build-id %s; %s).", m->name,
                 (unsigned long long) m->size, m->n_sections,
                 m->file ? ", lengths from " : ", lengths bounded by the next section", m->file ?: "",
                 m->build_id[0] ? m->build_id : "unknown", detail);
        log_debug("Module %s at 0x%llx.", m->name, (unsigned long long) m->base);
        event_active(t->syms_ev, EV_TIMEOUT, 0);
        return 1;
}

static int remove_module(tracker *t, const char *name, layout_source how, const char *detail, uint64_t mono) {
        layout *l = t->layout;
        uint64_t wall = tracker_wall_from_mono(mono);
        layout_module *m;
        int r;

        r = layout_remove_module(l, name, mono, how, &m);
        if (r < 0)
                return r;
        if (m->id > 0) {
                r = store_unload_module(t->store, m->id, wall, layout_source_to_string(how));
                if (r < 0)
                        log_error_errno(r, "Failed to record the unload of module %s: %m", name);
        }
        journal_module_change(t, "module-remove", m->id, detail, wall);
        t->stats.modules_removed++;
        log_info("Module %s unloaded (%s).", name, detail);
        return 1;
}

/* Makes a change durable at once, unless a drain is running: its batch
 * is committed when the drain is done, at the next commit interval.
 * Changes other than start-up count in the latency stats. */
void tracker_changed(tracker *t, uint64_t started_mono, bool timed) {
        uint64_t now;

        if (!ingest_draining(t->in))
                (void) ingest_commit(t->in);
        now = clock_ns(CLOCK_MONOTONIC);
        if (timed) {
                t->stats.last_change_ns = now - started_mono;
                t->stats.max_change_ns = MAX(t->stats.max_change_ns, t->stats.last_change_ns);
        }
        if (now > UNLOADED_KEEP_NS)
                layout_forget_before(t->layout, now - UNLOADED_KEEP_NS);
}

static int load_proc_modules(tracker *t, proc_module **ret, size_t *ret_n) {
        size_t skipped = 0;
        int r;

        r = proc_modules_load(t->root, ret, ret_n, &skipped);
        if (r == -ENOENT) {
                /* A kernel without CONFIG_MODULES: nothing to track. */
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return log_error_errno(r, "Failed to read %s/proc/modules: %m", t->root);
        if (skipped > 0)
                log_warning("Skipped %zu malformed lines of %s/proc/modules.", skipped, t->root);
        for (size_t i = 0; i < *ret_n; i++)
                if ((*ret)[i].base == 0) {
                        if (!t->hidden_warned)
                                log_warning("proc/modules shows no addresses (kernel.kptr_restrict, or no CAP_SYSLOG): "
                                            "modules are not tracked.");
                        t->hidden_warned = true;
                        free(*ret);
                        *ret = NULL;
                        *ret_n = 0;
                        return -EPERM;
                }
        return 0;
}

typedef struct open_row {
        int64_t id;
        char name[MODULE_NAME_MAX];
        uint64_t base, size;
        char build_id[BUILD_ID_HEX_MAX];
        bool used;
} open_row;

typedef struct open_rows {
        open_row *v;
        size_t n, alloc;
} open_rows;

static int collect_open_row(int64_t id, const char *name, uint64_t base, uint64_t size, const char *build_id, void *userdata) {
        open_rows *rows = userdata;

        if (GREEDY_REALLOC(rows->v, rows->alloc, rows->n + 1) < 0)
                return -ENOMEM;
        rows->v[rows->n] = (open_row) { .id = id, .base = base, .size = size };
        snprintf(rows->v[rows->n].name, sizeof rows->v[rows->n].name, "%s", name);
        snprintf(rows->v[rows->n].build_id, sizeof rows->v[rows->n].build_id, "%s", build_id);
        rows->n++;
        return 0;
}

int tracker_start(tracker *t) {
        layout *l = t->layout;
        uint64_t mono = clock_ns(CLOCK_MONOTONIC), wall = tracker_wall_from_mono(mono);
        _cleanup_free_ proc_module *pm = NULL;
        open_rows rows = {};
        char detail[128];
        size_t n = 0;
        int r;

        r = load_proc_modules(t, &pm, &n);
        if (r < 0 && r != -EPERM)
                return r;

        /* Rows of this boot left open by an earlier run continue if the
         * module is still there, unchanged; the others were unloaded while
         * perfsnapd was not running. */
        r = store_foreach_open_module(t->store, ingest_boot_id(t->in), collect_open_row, &rows);
        if (r < 0)
                log_warning_errno(r, "Failed to read the modules recorded by the previous run: %m");

        for (size_t i = 0; i < n; i++) {
                layout_module *m;

                if (pm[i].state == MODULE_STATE_UNLOADING)
                        continue;
                m = build_module(t, &pm[i], LAYOUT_SOURCE_STARTUP);
                if (!m) {
                        free(rows.v);
                        return log_oom();
                }
                /* Their kallsyms lines came with the kernel's table. */
                m->syms_in_kernel_table = true;
                m->init_before_sampling = live_before_sampling(t, &pm[i]);
                r = layout_add_module(l, m, mono, &m);
                if (r < 0) {
                        log_warning_errno(r, "Failed to add module %s to the layout: %m", pm[i].name);
                        continue;
                }
                for (size_t j = 0; j < rows.n; j++)
                        if (!rows.v[j].used && streq(rows.v[j].name, m->name) && rows.v[j].base == m->base &&
                            rows.v[j].size == m->size && streq(rows.v[j].build_id, m->build_id)) {
                                rows.v[j].used = true;
                                m->id = rows.v[j].id;
                                break;
                        }
                if (m->id == 0)
                        (void) record_module(t, m, wall);
        }
        for (size_t j = 0; j < rows.n; j++)
                if (!rows.v[j].used)
                        (void) store_unload_module(t->store, rows.v[j].id, wall, "rescan");
        free(rows.v);

        tracker_start_ksyms(t, wall);

        snprintf(detail, sizeof detail, "perfsnapd started: %zu modules loaded, %zu dynamic symbols",
                 layout_n_live(l), layout_n_live_ksyms(l));
        (void) tracker_journal(t, "start", 0, 0, detail, wall);
        tracker_changed(t, mono, false);
        log_info("Tracking %zu loaded modules and %zu dynamic symbols.", layout_n_live(l), layout_n_live_ksyms(l));
        return 0;
}

int tracker_rescan(tracker *t, const char *why, tracker_rescan_result *ret) {
        layout *l = t->layout;
        uint64_t mono = clock_ns(CLOCK_MONOTONIC);
        _cleanup_free_ proc_module *pm = NULL;
        tracker_rescan_result res = {};
        char detail[160];
        size_t n = 0;
        int r;

        t->stats.rescans++;
        r = load_proc_modules(t, &pm, &n);
        if (r < 0)
                return r;

        snprintf(detail, sizeof detail, "found by a rescan (%s)", why);
        /* Gone, or back at another address. */
        for (size_t i = 0; i < layout_n_modules(l); i++) {
                layout_module *m = layout_get_module(l, i);
                int k;

                if (m->unloaded_ns != LAYOUT_TIME_MAX)
                        continue;
                k = find_proc_module(pm, n, m->name);
                if (k >= 0 && pm[k].base == m->base) {
                        if (pm[k].state == MODULE_STATE_LIVE)
                                layout_module_init_done(l, m, mono);
                        continue;
                }
                if (remove_module(t, m->name, LAYOUT_SOURCE_RESCAN, detail, mono) > 0)
                        res.removed++;
        }
        for (size_t i = 0; i < n; i++) {
                if (pm[i].state == MODULE_STATE_UNLOADING || layout_find_live(l, pm[i].name))
                        continue;
                if (add_module(t, &pm[i], LAYOUT_SOURCE_RESCAN, detail, mono) > 0)
                        res.added++;
        }
        res.live = (unsigned) layout_n_live(l);
        if (res.added + res.removed > 0)
                tracker_changed(t, mono, true);
        log_debug("Rescan (%s): %u added, %u removed, %u loaded.", why, res.added, res.removed, res.live);
        if (ret)
                *ret = res;
        return 0;
}

void tracker_uevent(tracker *t, const uevent *ev) {
        layout *l = t->layout;
        uint64_t mono = clock_ns(CLOCK_MONOTONIC);
        _cleanup_free_ proc_module *pm = NULL;
        layout_module *live;
        char detail[96];
        size_t n = 0;
        int k;

        if (!streq(ev->subsystem, "module") || ev->action == UEVENT_ACTION_OTHER || !ev->module[0]) {
                t->stats.ignored_uevents++;
                return;
        }
        t->stats.module_uevents++;
        if (load_proc_modules(t, &pm, &n) < 0)
                return;
        k = find_proc_module(pm, n, ev->module);
        live = layout_find_live(l, ev->module);
        snprintf(detail, sizeof detail, "uevent %s, seqnum %llu", ev->action_name, (unsigned long long) ev->seqnum);

        if (ev->action == UEVENT_ACTION_ADD) {
                if (k < 0 || pm[k].state == MODULE_STATE_UNLOADING) {
                        /* Built in (no proc/modules line), or gone already: its
                         * remove follows. */
                        log_debug("Ignoring the add uevent of %s: not a loaded module.", ev->module);
                        t->stats.ignored_uevents++;
                        return;
                }
                if (live && live->base == pm[k].base) {
                        /* Known already: a rescan found it during its init,
                         * which has returned now. */
                        layout_module_init_done(l, live, mono);
                        return;
                }
                if (live)
                        (void) remove_module(t, ev->module, LAYOUT_SOURCE_UEVENT, "replaced at another address", mono);
                (void) add_module(t, &pm[k], LAYOUT_SOURCE_UEVENT, detail, mono);
        } else {
                if (!live) {
                        log_debug("Ignoring the remove uevent of %s: not tracked as loaded.", ev->module);
                        t->stats.ignored_uevents++;
                        return;
                }
                if (k >= 0 && pm[k].state == MODULE_STATE_LIVE && pm[k].base == live->base) {
                        /* Writing "remove" to /sys/module/NAME/uevent makes the
                         * kernel send one for a module that stays loaded. */
                        log_ratelimited_errno(LOG_NOTICE, 0, "Ignoring a remove uevent for module %s, which is still live.", ev->module);
                        t->stats.spurious_removes++;
                        return;
                }
                (void) remove_module(t, ev->module, LAYOUT_SOURCE_UEVENT, detail, mono);
        }
        tracker_changed(t, mono, true);
}
