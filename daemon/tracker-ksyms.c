/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Dynamic kernel code: BPF programs, BPF trampolines and dispatchers,
 * kprobe instruction slots and ftrace trampolines. The kernel announces
 * each register and unregister with a PERF_RECORD_KSYMBOL on the CPU
 * where it happened; the ingest path hands them over in time order with
 * the samples, so a sample is resolved against the symbols as they were
 * at its time. The start-up set, and the set after lost records, come
 * from the dynamic lines of kallsyms. */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "kernel/notes.h"
#include "log.h"
#include "macro.h"
#include "store/store.h"
#include "timeparse.h"
#include "tracker-private.h"

#define KSYM_RESCAN_MIN_INTERVAL_NS NSEC_PER_SEC
/* A kallsyms line's length is a guess up to the next line, at most this:
 * the size of the kernel's packs of BPF programs (a huge page on x86). */
#define KSYM_GUESS_MAX_BYTES (2u * 1024u * 1024u)

static int record_ksym(tracker *t, layout_ksym *k, uint64_t wall) {
        int r;

        r = store_add_ksym(t->store, &(store_ksym) {
                        .boot_id = ingest_boot_id(t->in),
                        .name = k->name,
                        .addr = k->addr,
                        .len = k->len,
                        .type = layout_ksym_type_to_string(k->type),
                        .registered_ns = wall,
                        .registered_how = layout_source_to_string(k->registered_how),
                }, &k->id);
        if (r < 0)
                return log_error_errno(r, "Failed to record the dynamic symbol %s in the database: %m", k->name);
        return 0;
}

static void unregister_ksym(tracker *t, layout_ksym *k, uint64_t mono, uint64_t wall, layout_source how,
                            const char *detail) {
        int r;

        if (layout_remove_ksym(t->layout, k, mono, how) < 0)
                return;
        if (k->id > 0) {
                r = store_unregister_ksym(t->store, k->id, wall, layout_source_to_string(how));
                if (r < 0)
                        log_error_errno(r, "Failed to record the unregistration of %s: %m", k->name);
        }
        (void) tracker_journal(t, "ksym-unregister", 0, k->id, detail, wall);
        t->stats.ksyms_unregistered++;
        log_debug("Dynamic symbol %s at 0x%llx unregistered (%s).", k->name, (unsigned long long) k->addr, detail);
}

/* Registers a symbol. Live ones it overlaps are gone (their unregister
 * records were lost): they are unregistered at now_mono; except that a
 * guessed length reaching into the new symbol is only shortened. */
static layout_ksym *register_ksym(tracker *t, uint64_t addr, uint64_t len, bool exact, layout_ksym_type type,
                                  const char *name, uint64_t from_mono, uint64_t now_mono, uint64_t wall,
                                  layout_source how, const char *detail) {
        layout *l = t->layout;
        layout_ksym *k;
        int r;

        while ((k = layout_find_live_ksym(l, addr, len, NULL))) {
                if (!k->len_exact && k->addr < addr)
                        layout_ksym_set_len(l, k, addr - k->addr, false);
                else
                        unregister_ksym(t, k, now_mono, wall, how, "overlapped by a new symbol");
        }

        r = layout_add_ksym(l, addr, len, type, name, from_mono, how, &k);
        if (r < 0) {
                log_error_errno(r, "Failed to add the dynamic symbol %s to the layout: %m", name);
                return NULL;
        }
        k->len_exact = exact;
        (void) record_ksym(t, k, wall);
        (void) tracker_journal(t, "ksym-register", 0, k->id, detail, wall);
        t->stats.ksyms_registered++;
        log_debug("Dynamic symbol %s at 0x%llx, %llu bytes, registered (%s).", name, (unsigned long long) addr,
                  (unsigned long long) len, detail);
        return k;
}

static void on_ksymbol(tracker *t, const perf_record *rec, uint64_t mono, uint64_t wall) {
        const perf_ksymbol *ks = &rec->ksymbol;
        layout_ksym *k;

        t->stats.ksym_records++;
        k = layout_find_live_ksym(t->layout, ks->addr, 1, ks->name);
        if (ks->flags & PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER) {
                if (!k || k->addr != ks->addr || !streq(k->name, ks->name)) {
                        /* Registered and gone while perfsnapd started, or its
                         * register record was lost and a rescan did not see it. */
                        t->stats.ksym_unknown_unregisters++;
                        log_debug("Unregister of %s at 0x%llx, which is not registered: ignored.", ks->name,
                                  (unsigned long long) ks->addr);
                        return;
                }
                unregister_ksym(t, k, mono, wall, LAYOUT_SOURCE_PERF, "PERF_RECORD_KSYMBOL");
                return;
        }
        if (k && k->addr == ks->addr && streq(k->name, ks->name)) {
                /* Registered while perfsnapd read kallsyms at start-up, or
                 * found by a rescan before its record was read: now its
                 * length is known. */
                t->stats.ksym_duplicates++;
                if (!k->len_exact && ks->len > 0)
                        layout_ksym_set_len(t->layout, k, ks->len, true);
                return;
        }
        if (ks->len == 0 || !ks->name[0]) {
                log_debug("Ignoring a PERF_RECORD_KSYMBOL without a length or name at 0x%llx.",
                          (unsigned long long) ks->addr);
                return;
        }
        (void) register_ksym(t, ks->addr, ks->len, true, layout_ksym_type_from_perf(ks->ksym_type), ks->name, mono,
                             mono, wall, LAYOUT_SOURCE_PERF, "PERF_RECORD_KSYMBOL");
}

/* A loaded program's id, for its main function's symbol, named after the
 * program's tag: "bpf_prog_<tag>_...". The kernel sends the program's
 * ksymbol records just before; identical programs share a tag, so the
 * newest such symbol without an id is the one. */
static void on_bpf_event(tracker *t, const perf_record *rec) {
        layout *l = t->layout;
        char tag[BUILD_ID_HEX_MAX], prefix[sizeof "bpf_prog_" + BUILD_ID_HEX_MAX];
        layout_ksym *best = NULL;
        int n;

        t->stats.bpf_events++;
        if (rec->bpf.type != PERF_BPF_EVENT_PROG_LOAD || rec->bpf.id == 0)
                return;
        build_id_to_hex(rec->bpf.tag, sizeof rec->bpf.tag, tag);
        n = snprintf(prefix, sizeof prefix, "bpf_prog_%s", tag);
        for (size_t i = 0; i < layout_n_live_ksyms(l); i++) {
                layout_ksym *k = layout_get_live_ksym(l, i);

                if (k->prog_id != 0 || k->type != LAYOUT_KSYM_BPF ||
                    k->registered_how != LAYOUT_SOURCE_PERF || strncmp(k->name, prefix, (size_t) n) != 0)
                        continue;
                if (!best || k->registered_ns > best->registered_ns ||
                    (k->registered_ns == best->registered_ns && k->id > best->id))
                        best = k;
        }
        if (!best)
                return;
        best->prog_id = rec->bpf.id;
        if (best->id > 0)
                (void) store_set_ksym_prog_id(t->store, best->id, best->prog_id);
}

static void schedule_ksym_rescan(tracker *t) {
        uint64_t now = clock_ns(CLOCK_MONOTONIC), wait = 0;
        struct timeval tv;

        if (t->ksym_rescan_pending)
                return;
        if (t->last_ksym_rescan_ns > 0 && now - t->last_ksym_rescan_ns < KSYM_RESCAN_MIN_INTERVAL_NS)
                wait = t->last_ksym_rescan_ns + KSYM_RESCAN_MIN_INTERVAL_NS - now;
        tv = (struct timeval) { .tv_sec = (time_t) (wait / NSEC_PER_SEC), .tv_usec = (suseconds_t) (wait % NSEC_PER_SEC / 1000) };
        if (event_add(t->ksym_rescan_ev, &tv) == 0)
                t->ksym_rescan_pending = true;
}

void tracker_on_ksym_rescan(evutil_socket_t fd, short what, void *userdata) {
        tracker *t = userdata;

        t->ksym_rescan_pending = false;
        (void) tracker_rescan_ksyms(t, "perf records were lost", NULL);
}

void tracker_perf_record(tracker *t, const perf_record *rec, int64_t mono_to_wall_ns) {
        uint64_t mono = rec->sid.time, wall = (uint64_t) ((int64_t) mono + mono_to_wall_ns);

        switch (rec->type) {
        case PERF_RECORD_KSYMBOL:
                on_ksymbol(t, rec, mono, wall);
                break;
        case PERF_RECORD_BPF_EVENT:
                on_bpf_event(t, rec);
                break;
        case PERF_RECORD_LOST:
                schedule_ksym_rescan(t);
                break;
        default:
                break;
        }
}

/* The dynamic lines of a kallsyms table, in address order. */
typedef struct dyn_line {
        uint64_t addr, len;
        const char *name;
        layout_ksym_type type;
        bool seen;
        char *own;              /* name, when the line owns it (a rescan's) */
} dyn_line;

static dyn_line *dyn_lines_free(dyn_line *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i].own);
        free(v);
        return NULL;
}

/* What a rescan keeps of kallsyms as it streams by: every line's address
 * (for the lengths) and the dynamic lines. */
typedef struct dyn_scan {
        uint64_t *addrs;
        size_t n_addrs, addrs_alloc;
        dyn_line *v;
        size_t n, alloc;
        bool nonzero;
} dyn_scan;

static int scan_line(const kallsyms_line *l, void *userdata) {
        dyn_scan *d = userdata;
        layout_ksym_type type;
        char module[64];

        if (GREEDY_REALLOC(d->addrs, d->addrs_alloc, d->n_addrs + 1) < 0)
                return -ENOMEM;
        d->addrs[d->n_addrs++] = l->addr;
        d->nonzero = d->nonzero || l->addr != 0;
        if (!l->module || l->module_len >= sizeof module)
                return 0;
        memcpy(module, l->module, l->module_len);
        module[l->module_len] = 0;
        if (layout_ksym_type_from_kallsyms(module, &type) < 0)
                return 0;
        if (GREEDY_REALLOC(d->v, d->alloc, d->n + 1) < 0)
                return -ENOMEM;
        d->v[d->n] = (dyn_line) { .addr = l->addr, .type = type, .own = strndup(l->name, l->name_len) };
        if (!d->v[d->n].own)
                return -ENOMEM;
        d->v[d->n].name = d->v[d->n].own;
        d->n++;
        return 0;
}

static int cmp_dyn_line(const void *a, const void *b) {
        const dyn_line *x = a, *y = b;

        /* By address; lines at one address by name (find_line() looks
         * at each of them). */
        if (x->addr != y->addr)
                return x->addr < y->addr ? -1 : 1;
        return strcmp(x->name, y->name);
}

/* The dynamic lines of ROOT/proc/kallsyms with their lengths as
 * collect_dynamic() gives them from a table (up to the next higher
 * address of any line, at most KSYM_GUESS_MAX_BYTES), read as a stream:
 * a rescan holds those lines and the addresses (8 bytes a line), not the
 * file and a second table of the kernel's symbols (kallsyms_load(), ~15
 * MB at once for 122,000 symbols, beside the table in use). */
static int scan_dynamic(const char *root, dyn_line **ret, size_t *ret_n) {
        dyn_scan d = {};
        size_t n = 0;
        int r;

        r = kallsyms_stream(root, scan_line, &d);
        if (r >= 0 && d.n_addrs > 0 && !d.nonzero)
                r = -EPERM;     /* addresses hidden (kptr_restrict), as kallsyms_parse() says */
        if (r < 0) {
                free(d.addrs);
                dyn_lines_free(d.v, d.n);
                return r;
        }
        sort_u64(d.addrs, d.n_addrs);
        if (d.n > 0)
                qsort(d.v, d.n, sizeof *d.v, cmp_dyn_line);
        for (size_t i = 0; i < d.n; i++) {
                dyn_line *x = d.v + i;
                uint64_t end = x->addr + KSYM_GUESS_MAX_BYTES;
                size_t lo = 0, hi = d.n_addrs;

                /* The first address above x's. */
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (d.addrs[mid] <= x->addr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo < d.n_addrs)
                        end = MIN(end, d.addrs[lo]);
                if (end <= x->addr) {
                        free(x->own);
                        continue;
                }
                x->len = end - x->addr;
                d.v[n++] = *x;
        }
        free(d.addrs);
        *ret = d.v;
        *ret_n = n;
        return 0;
}

static int collect_dynamic(const kallsyms *k, dyn_line **ret, size_t *ret_n) {
        dyn_line *v = NULL;
        size_t n = 0, alloc = 0;
        ksym s, next;

        for (size_t i = 0; kallsyms_get(k, i, &s) >= 0; i++) {
                layout_ksym_type type;
                uint64_t end = s.addr + KSYM_GUESS_MAX_BYTES;

                if (layout_ksym_type_from_kallsyms(s.module, &type) < 0)
                        continue;
                /* kallsyms has no lengths: up to the next line at a higher
                 * address, whatever it belongs to. */
                for (size_t j = i + 1; kallsyms_get(k, j, &next) >= 0; j++)
                        if (next.addr > s.addr) {
                                end = MIN(end, next.addr);
                                break;
                        }
                if (end <= s.addr)
                        continue;
                if (GREEDY_REALLOC(v, alloc, n + 1) < 0) {
                        free(v);
                        return -ENOMEM;
                }
                v[n++] = (dyn_line) { .addr = s.addr, .len = end - s.addr, .name = s.name, .type = type };
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static dyn_line *find_line(dyn_line *v, size_t n, uint64_t addr, const char *name) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v[mid].addr < addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo; i < n && v[i].addr == addr; i++)
                if (streq(v[i].name, name))
                        return &v[i];
        return NULL;
}

typedef struct open_ksyms {
        tracker *t;
        dyn_line *lines;
        size_t n_lines;
        uint64_t wall;
} open_ksyms;

static int continue_open_ksym(int64_t id, const char *name, uint64_t addr, uint64_t len, const char *how,
                             void *userdata) {
        open_ksyms *o = userdata;
        layout *l = o->t->layout;
        layout_ksym *k = layout_find_live_ksym(l, addr, 1, name);

        if (k && k->id == 0 && k->addr == addr && streq(k->name, name)) {
                k->id = id;
                /* The earlier run had its length from the record. */
                if (streq(how, layout_source_to_string(LAYOUT_SOURCE_PERF)))
                        layout_ksym_set_len(l, k, len, true);
        } else
                (void) store_unregister_ksym(o->t->store, id, o->wall, "rescan");
        return 0;
}

void tracker_start_ksyms(tracker *t, uint64_t wall) {
        layout *l = t->layout;
        _cleanup_free_ dyn_line *lines = NULL;
        size_t n = 0;
        int r;

        r = collect_dynamic(layout_kernel_syms(l), &lines, &n);
        if (r < 0) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < n; i++) {
                r = layout_add_ksym(l, lines[i].addr, lines[i].len, lines[i].type, lines[i].name, 0,
                                    LAYOUT_SOURCE_STARTUP, NULL);
                if (r < 0)
                        log_warning_errno(r, "Failed to add the dynamic symbol %s to the layout: %m", lines[i].name);
        }
        /* Rows of this boot an earlier run left open continue if the symbol
         * is still there; the others went while perfsnapd was not running. */
        r = store_foreach_open_ksym(t->store, ingest_boot_id(t->in), continue_open_ksym,
                                    &(open_ksyms) { t, lines, n, wall });
        if (r < 0)
                log_warning_errno(r, "Failed to read the dynamic symbols recorded by the previous run: %m");
        for (size_t i = 0; i < layout_n_ksyms(l); i++) {
                layout_ksym *k = layout_get_ksym(l, i);

                if (k->id == 0)
                        (void) record_ksym(t, k, wall);
        }
}

int tracker_rescan_ksyms(tracker *t, const char *why, tracker_rescan_result *ret) {
        layout *l = t->layout;
        uint64_t mono = clock_ns(CLOCK_MONOTONIC), wall = tracker_wall_from_mono(mono);
        tracker_rescan_result res = {};
        dyn_line *lines = NULL;
        char detail[160];
        size_t n = 0;
        int r;

        t->stats.ksym_rescans++;
        t->last_ksym_rescan_ns = mono;
        r = scan_dynamic(t->root, &lines, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to read kallsyms for a rescan of the dynamic symbols: %m");

        snprintf(detail, sizeof detail, "found by a rescan (%s)", why);
        for (size_t i = 0; i < layout_n_ksyms(l); i++) {
                layout_ksym *x = layout_get_ksym(l, i);
                dyn_line *line;

                if (x->unregistered_ns != LAYOUT_TIME_MAX)
                        continue;
                line = find_line(lines, n, x->addr, x->name);
                if (line) {
                        line->seen = true;
                        continue;
                }
                unregister_ksym(t, x, mono, wall, LAYOUT_SOURCE_RESCAN, detail);
                res.ksyms_removed++;
        }
        for (size_t i = 0; i < n; i++) {
                if (lines[i].seen)
                        continue;
                /* Since when: its addresses were free from the last
                 * unregistration there on. */
                if (register_ksym(t, lines[i].addr, lines[i].len, false, lines[i].type, lines[i].name,
                                  layout_ksym_free_since(l, lines[i].addr, lines[i].len), mono, wall,
                                  LAYOUT_SOURCE_RESCAN, detail))
                        res.ksyms_added++;
        }
        dyn_lines_free(lines, n);

        res.ksyms_live = (unsigned) layout_n_live_ksyms(l);
        if (res.ksyms_added + res.ksyms_removed > 0)
                tracker_changed(t, mono, false);
        log_full_errno(res.ksyms_added + res.ksyms_removed > 0 ? LOG_INFO : LOG_DEBUG,
                 0, "Rescan of dynamic symbols (%s): %u registered, %u unregistered, %u live.", why,
                 res.ksyms_added, res.ksyms_removed, res.ksyms_live);
        if (ret) {
                ret->ksyms_added = res.ksyms_added;
                ret->ksyms_removed = res.ksyms_removed;
                ret->ksyms_live = res.ksyms_live;
        }
        return 0;
}
