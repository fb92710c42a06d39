/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The kernel's code layout over time: core symbols, module instances and
 * dynamic symbols, each with its time window (layout.h). */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/layout.h"
#include "macro.h"

struct layout {
        kallsyms *kernel;

        layout_module **mods;           /* in the order added */
        size_t n_mods, mods_alloc;

        layout_ksym **ksyms;            /* by address, then in the order added */
        size_t n_ksyms, ksyms_alloc;
        /* The registered ones among them, in the same order: what a
         * record of a new symbol is checked against and the journal
         * lists. A storm of programs loaded and unloaded leaves thousands
         * unregistered in ksyms until the drain's horizon passes them. */
        layout_ksym **live;
        size_t n_live, live_alloc;
        uint64_t ksym_max_len;          /* the longest ever added: bounds the lookup's backward scan */

        uint64_t *bounds;               /* sorted window boundaries, see layout_epoch() */
        size_t n_bounds, bounds_alloc;

        uint64_t generation;
};

static const char *const source_names[_LAYOUT_SOURCE_MAX] = {
        [LAYOUT_SOURCE_STARTUP] = "startup",
        [LAYOUT_SOURCE_UEVENT]  = "uevent",
        [LAYOUT_SOURCE_RESCAN]  = "rescan",
        [LAYOUT_SOURCE_PERF]    = "perf",
};

const char *layout_source_to_string(layout_source s) {
        return s < _LAYOUT_SOURCE_MAX ? source_names[s] : "unknown";
}

static const char *const ksym_type_names[_LAYOUT_KSYM_TYPE_MAX] = {
        [LAYOUT_KSYM_UNKNOWN] = "unknown",
        [LAYOUT_KSYM_BPF]     = "bpf",
        [LAYOUT_KSYM_OOL]     = "ool",
};

const char *layout_ksym_type_to_string(layout_ksym_type t) {
        return t < _LAYOUT_KSYM_TYPE_MAX ? ksym_type_names[t] : "unknown";
}

layout_ksym_type layout_ksym_type_from_perf(uint16_t perf_type) {
        switch (perf_type) {
        case PERF_RECORD_KSYMBOL_TYPE_BPF:
                return LAYOUT_KSYM_BPF;
        case PERF_RECORD_KSYMBOL_TYPE_OOL:
                return LAYOUT_KSYM_OOL;
        default:
                return LAYOUT_KSYM_UNKNOWN;
        }
}

int layout_ksym_type_from_kallsyms(const char *module, layout_ksym_type *ret) {
        if (!module)
                return -EINVAL;
        if (streq(module, "bpf"))
                *ret = LAYOUT_KSYM_BPF;
        else if (strncmp(module, "__builtin__", 11) == 0)
                *ret = LAYOUT_KSYM_OOL;
        else
                return -EINVAL;
        return 0;
}

int layout_new(layout **ret) {
        layout *l = calloc(1, sizeof *l);

        if (!l)
                return -ENOMEM;
        *ret = l;
        return 0;
}

layout_module *layout_module_new(const char *name) {
        layout_module *m;

        if (!name || strlen(name) >= MODULE_NAME_MAX)
                return NULL;
        m = calloc(1, sizeof *m);
        if (!m)
                return NULL;
        strcpy(m->name, name);
        m->unloaded_ns = LAYOUT_TIME_MAX;
        return m;
}

layout_module *layout_module_free(layout_module *m) {
        if (!m)
                return NULL;
        free(m->file);
        module_sections_free(m->sections, m->n_sections);
        module_symbols_free(m->elf_syms, m->n_elf_syms);
        kallsyms_free(m->syms);
        free(m);
        return NULL;
}

layout *layout_free(layout *l) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < l->n_mods; i++)
                layout_module_free(l->mods[i]);
        free(l->mods);
        for (size_t i = 0; i < l->n_ksyms; i++)
                free(l->ksyms[i]);
        free(l->ksyms);
        free(l->live);
        free(l->bounds);
        kallsyms_free(l->kernel);
        free(l);
        return NULL;
}

void layout_set_kernel(layout *l, kallsyms *k) {
        kallsyms_free(l->kernel);
        l->kernel = k;
        l->generation++;
}

const kallsyms *layout_kernel_syms(const layout *l) {
        return l->kernel;
}

static int rebuild_bounds(layout *l) {
        size_t need = (l->n_mods + l->n_ksyms) * 2 + 1, n = 0;
        uint64_t *b;

        l->generation++;
        if (GREEDY_REALLOC(l->bounds, l->bounds_alloc, need) < 0)
                return -ENOMEM;
        b = l->bounds;
        for (size_t i = 0; i < l->n_mods; i++) {
                if (l->mods[i]->valid_from_ns > 0)
                        b[n++] = l->mods[i]->valid_from_ns;
                if (l->mods[i]->unloaded_ns != LAYOUT_TIME_MAX)
                        b[n++] = l->mods[i]->unloaded_ns;
        }
        for (size_t i = 0; i < l->n_ksyms; i++) {
                if (l->ksyms[i]->registered_ns > 0)
                        b[n++] = l->ksyms[i]->registered_ns;
                if (l->ksyms[i]->unregistered_ns != LAYOUT_TIME_MAX)
                        b[n++] = l->ksyms[i]->unregistered_ns;
        }
        sort_u64(b, n);
        l->n_bounds = n;
        return 0;
}

/* One more window boundary: dynamic symbols come and go in time order,
 * so it is usually appended; a full rebuild would sort them all. */
static int add_bound(layout *l, uint64_t t) {
        size_t i;

        l->generation++;
        if (t == 0)
                return 0;
        if (GREEDY_REALLOC(l->bounds, l->bounds_alloc, l->n_bounds + 1) < 0)
                return -ENOMEM;
        i = l->n_bounds;
        if (i > 0 && l->bounds[i - 1] > t)
                i = layout_epoch(l, t);
        memmove(l->bounds + i + 1, l->bounds + i, (l->n_bounds - i) * sizeof *l->bounds);
        l->bounds[i] = t;
        l->n_bounds++;
        return 0;
}

uint32_t layout_epoch(const layout *l, uint64_t time_ns) {
        size_t lo = 0, hi = l->n_bounds;

        /* the number of bounds <= time_ns */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (l->bounds[mid] <= time_ns)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return (uint32_t) lo;
}

uint64_t layout_generation(const layout *l) {
        return l->generation;
}

static bool in_range(uint64_t addr, uint64_t start, uint64_t len) {
        return addr >= start && addr - start < len;
}

/* The section holding addr: the last one starting at or before it, if addr
 * is inside its length. */
static const module_section *find_section(const layout_module *m, uint64_t addr) {
        size_t lo = 0, hi = m->n_sections;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->sections[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* Sections may share a start (empty ones): look back past those. */
        for (size_t i = lo; i > 0; i--) {
                const module_section *s = &m->sections[i - 1];
                if (in_range(addr, s->addr, s->len))
                        return s;
                if (s->len > 0)
                        break;
        }
        return NULL;
}

static bool is_init_section(const module_section *s) {
        return strncmp(s->name, ".init", 5) == 0;
}

/* The executable section outside the core layout that holds addr at
 * time_ns, if any: code of this module by the section map alone. */
static const module_section *find_code_section(const layout_module *m, uint64_t addr, uint64_t time_ns) {
        const module_section *s = find_section(m, addr);

        if (!s || !s->exec)
                return NULL;
        if (is_init_section(s) && time_ns >= m->init_end_ns)
                return NULL;
        return s;
}

/* Whether one of a's executable sections lies in b's core layout (or b's
 * base in one of them): init sections if init is true, the others if not.
 * Data sections (the symtab copy, .init.data) say nothing: their memory is
 * reused freely. */
static bool sections_overlap(const layout_module *a, const layout_module *b, bool init) {
        for (size_t i = 0; i < a->n_sections; i++) {
                const module_section *s = &a->sections[i];
                if (s->len == 0 || !s->exec || is_init_section(s) != init)
                        continue;
                if (in_range(s->addr, b->base, b->size) || in_range(b->base, s->addr, s->len))
                        return true;
        }
        return false;
}

/* The time from which code of the new module m may sit where o's code was,
 * as far as o tells: after o's unload where their core layouts or
 * executable sections overlap (for a live o, after its add: m can only be
 * in o's memory if that memory was o's freed init, see below); after o's
 * init returned where o's init sections overlap m's core layout, since the
 * kernel frees them then. m's own init sections overlapping a live o are
 * stale (m's init is over, o was put there since): they say nothing. 0 if
 * they do not overlap. */
static uint64_t overlap_ends(const layout_module *m, const layout_module *o) {
        bool o_live = o->unloaded_ns == LAYOUT_TIME_MAX;
        uint64_t o_end = o_live ? o->loaded_ns : o->unloaded_ns;

        if ((m->size > 0 && o->size > 0 && m->base < o->base + o->size && o->base < m->base + m->size) ||
            sections_overlap(m, o, false) || sections_overlap(o, m, false) ||
            (!o_live && sections_overlap(m, o, true)))
                return o_end;
        /* o's init code was there until it returned, also for an o found
         * in its init, whose init ended after its add. */
        if (sections_overlap(o, m, true)) {
                if (o->init_end_ns == LAYOUT_TIME_MAX)
                        return o_end;
                return o_live ? o->init_end_ns : MIN(o->init_end_ns, o->unloaded_ns);
        }
        return 0;
}

int layout_add_module(layout *l, layout_module *m, uint64_t now_ns, layout_module **ret) {
        uint64_t from = 0;
        int r;

        if (layout_find_live(l, m->name)) {
                layout_module_free(m);
                return -EEXIST;
        }
        if (GREEDY_REALLOC(l->mods, l->mods_alloc, l->n_mods + 1) < 0) {
                layout_module_free(m);
                return -ENOMEM;
        }

        /* A module that was Live before the sampling began ran its init
         * before anything was sampled; one found later (at start-up, or
         * after a missed uevent) at some time before now. */
        m->init_end_ns = m->init_running ? LAYOUT_TIME_MAX : m->init_before_sampling ? 0 : now_ns;
        /* The module's addresses were someone else's until that one's code
         * left them: before that, they are not ours. */
        for (size_t i = 0; i < l->n_mods; i++) {
                uint64_t until = overlap_ends(m, l->mods[i]);
                from = MAX(from, until);
        }
        m->loaded_ns = now_ns;
        m->valid_from_ns = MIN(from, now_ns);
        m->unloaded_ns = LAYOUT_TIME_MAX;
        l->mods[l->n_mods++] = m;

        r = rebuild_bounds(l);
        if (r < 0)
                return r;
        if (ret)
                *ret = m;
        return 0;
}

layout_module *layout_find_live(const layout *l, const char *name) {
        for (size_t i = l->n_mods; i > 0; i--)
                if (l->mods[i - 1]->unloaded_ns == LAYOUT_TIME_MAX && streq(l->mods[i - 1]->name, name))
                        return l->mods[i - 1];
        return NULL;
}

int layout_remove_module(layout *l, const char *name, uint64_t now_ns, layout_source how, layout_module **ret) {
        layout_module *m = layout_find_live(l, name);

        if (!m)
                return -ENOENT;
        m->unloaded_ns = MAX(now_ns, m->valid_from_ns);
        m->unloaded_how = how;
        if (ret)
                *ret = m;
        return rebuild_bounds(l);
}

void layout_module_init_done(layout *l, layout_module *m, uint64_t now_ns) {
        if (m->init_end_ns != LAYOUT_TIME_MAX)
                return;
        m->init_running = false;
        m->init_end_ns = MAX(now_ns, m->loaded_ns);
        l->generation++;
}

void layout_module_set_syms(layout *l, layout_module *m, kallsyms *syms) {
        kallsyms_free(m->syms);
        m->syms = syms;
        m->syms_in_kernel_table = false;
        l->generation++;
}

size_t layout_n_modules(const layout *l) {
        return l->n_mods;
}

layout_module *layout_get_module(const layout *l, size_t i) {
        return i < l->n_mods ? l->mods[i] : NULL;
}

size_t layout_n_live(const layout *l) {
        size_t n = 0;

        for (size_t i = 0; i < l->n_mods; i++)
                n += l->mods[i]->unloaded_ns == LAYOUT_TIME_MAX;
        return n;
}

size_t layout_forget_before(layout *l, uint64_t time_ns) {
        size_t j = 0, gone;

        for (size_t i = 0; i < l->n_mods; i++) {
                if (l->mods[i]->unloaded_ns < time_ns)
                        layout_module_free(l->mods[i]);
                else
                        l->mods[j++] = l->mods[i];
        }
        gone = l->n_mods - j;
        l->n_mods = j;
        if (gone > 0)
                (void) rebuild_bounds(l);       /* shrinking: cannot fail for lack of memory */
        return gone;
}

/* The index of the first of v[0..n) starting above addr. */
static size_t ksym_upper_bound(layout_ksym *const *v, size_t n, uint64_t addr) {
        size_t lo = 0, hi = n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (v[mid]->addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
        return in_range(a, b, blen) || in_range(b, a, alen);
}

int layout_add_ksym(layout *l, uint64_t addr, uint64_t len, layout_ksym_type type, const char *name,
                    uint64_t registered_ns, layout_source how, layout_ksym **ret) {
        layout_ksym *k;
        size_t i, n;
        int r;

        if (!name || !name[0] || len == 0 || addr + len < addr)
                return -EINVAL;
        if (GREEDY_REALLOC(l->ksyms, l->ksyms_alloc, l->n_ksyms + 1) < 0 ||
            GREEDY_REALLOC(l->live, l->live_alloc, l->n_live + 1) < 0)
                return -ENOMEM;
        n = strlen(name);
        k = calloc(1, sizeof *k + n + 1);
        if (!k)
                return -ENOMEM;
        *k = (layout_ksym) {
                .addr = addr,
                .len = len,
                .type = type,
                .registered_how = how,
                .registered_ns = registered_ns,
                .unregistered_ns = LAYOUT_TIME_MAX,
        };
        memcpy(k->name, name, n + 1);

        i = ksym_upper_bound(l->ksyms, l->n_ksyms, addr);
        memmove(l->ksyms + i + 1, l->ksyms + i, (l->n_ksyms - i) * sizeof *l->ksyms);
        l->ksyms[i] = k;
        l->n_ksyms++;
        i = ksym_upper_bound(l->live, l->n_live, addr);
        memmove(l->live + i + 1, l->live + i, (l->n_live - i) * sizeof *l->live);
        l->live[i] = k;
        l->n_live++;
        if (len > l->ksym_max_len)
                l->ksym_max_len = len;

        r = add_bound(l, registered_ns);
        if (r < 0)
                return r;
        if (ret)
                *ret = k;
        return 0;
}

/* Calls the symbols of v[0..n) (l's, or its live ones) that may overlap
 * [addr, addr + len), newest first at each address, until fn returns
 * true; returns that symbol. */
static layout_ksym *ksym_scan_in(const layout *l, layout_ksym *const *v, size_t n, uint64_t addr, uint64_t len,
                                 bool (*fn)(const layout_ksym *k, const void *arg), const void *arg) {
        uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;

        /* Symbols starting before end, back to the longest symbol's reach. */
        for (size_t i = ksym_upper_bound(v, n, end - 1); i > 0; i--) {
                layout_ksym *k = v[i - 1];

                /* (No wrap-around: then it may still reach addr.) */
                if (k->addr + l->ksym_max_len <= addr && k->addr + l->ksym_max_len >= k->addr)
                        break;
                if (ranges_overlap(k->addr, k->len, addr, len) && fn(k, arg))
                        return k;
        }
        return NULL;
}

static layout_ksym *ksym_scan(const layout *l, uint64_t addr, uint64_t len,
                              bool (*fn)(const layout_ksym *k, const void *arg), const void *arg) {
        return ksym_scan_in(l, l->ksyms, l->n_ksyms, addr, len, fn, arg);
}

static bool is_live(const layout_ksym *k, const void *arg) {
        return k->unregistered_ns == LAYOUT_TIME_MAX;
}

typedef struct live_match {
        uint64_t addr;
        const char *name;
} live_match;

static bool is_live_at(const layout_ksym *k, const void *arg) {
        const live_match *m = arg;

        return is_live(k, NULL) && k->addr == m->addr && (!m->name || streq(k->name, m->name));
}

layout_ksym *layout_find_live_ksym(const layout *l, uint64_t addr, uint64_t len, const char *name) {
        layout_ksym *k = ksym_scan_in(l, l->live, l->n_live, addr, 1, is_live_at, &(live_match) { addr, name });

        return k ?: ksym_scan_in(l, l->live, l->n_live, addr, MAX(len, (uint64_t) 1), is_live, NULL);
}

void layout_ksym_set_len(layout *l, layout_ksym *k, uint64_t len, bool exact) {
        if (len == 0 || k->addr + len < k->addr)
                return;
        k->len = len;
        k->len_exact = exact;
        if (len > l->ksym_max_len)
                l->ksym_max_len = len;
        l->generation++;
}

int layout_remove_ksym(layout *l, layout_ksym *k, uint64_t now_ns, layout_source how) {
        size_t i;

        if (k->unregistered_ns != LAYOUT_TIME_MAX)
                return -ENOENT;
        /* Among the live ones at its address (they are by address). */
        for (i = ksym_upper_bound(l->live, l->n_live, k->addr); i > 0 && l->live[i - 1]->addr == k->addr; i--)
                if (l->live[i - 1] == k) {
                        memmove(l->live + i - 1, l->live + i, (l->n_live - i) * sizeof *l->live);
                        l->n_live--;
                        break;
                }
        k->unregistered_ns = MAX(now_ns, k->registered_ns);
        k->unregistered_how = how;
        return add_bound(l, k->unregistered_ns);
}

typedef struct latest_unregister {
        uint64_t *since;
} latest_unregister;

static bool note_unregister(const layout_ksym *k, const void *arg) {
        const latest_unregister *u = arg;

        if (k->unregistered_ns != LAYOUT_TIME_MAX)
                *u->since = MAX(*u->since, k->unregistered_ns);
        return false;   /* look at all of them */
}

uint64_t layout_ksym_free_since(const layout *l, uint64_t addr, uint64_t len) {
        uint64_t since = 0;

        (void) ksym_scan(l, addr, MAX(len, (uint64_t) 1), note_unregister, &(latest_unregister) { &since });
        return since;
}

size_t layout_n_ksyms(const layout *l) {
        return l->n_ksyms;
}

layout_ksym *layout_get_ksym(const layout *l, size_t i) {
        return i < l->n_ksyms ? l->ksyms[i] : NULL;
}

size_t layout_n_live_ksyms(const layout *l) {
        return l->n_live;
}

layout_ksym *layout_get_live_ksym(const layout *l, size_t i) {
        return i < l->n_live ? l->live[i] : NULL;
}

size_t layout_forget_ksyms_before(layout *l, uint64_t time_ns) {
        size_t j = 0, gone;

        for (size_t i = 0; i < l->n_ksyms; i++) {
                if (l->ksyms[i]->unregistered_ns < time_ns)
                        free(l->ksyms[i]);
                else
                        l->ksyms[j++] = l->ksyms[i];
        }
        gone = l->n_ksyms - j;
        l->n_ksyms = j;
        if (gone > 0)
                (void) rebuild_bounds(l);       /* shrinking: cannot fail for lack of memory */
        return gone;
}

typedef struct at_time {
        uint64_t addr, time_ns;
} at_time;

static bool covers_at(const layout_ksym *k, const void *arg) {
        const at_time *a = arg;

        return a->time_ns >= k->registered_ns && a->time_ns < k->unregistered_ns;
}

static bool covers_at_exact(const layout_ksym *k, const void *arg) {
        return k->len_exact && covers_at(k, arg);
}

/* The ELF function covering addr within section s (or anywhere, without s). */
static const module_symbol *find_elf_symbol(const layout_module *m, const module_section *s, uint64_t addr) {
        size_t lo = 0, hi = m->n_elf_syms;
        const module_symbol *f;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (m->elf_syms[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0)
                return NULL;
        f = &m->elf_syms[lo - 1];
        /* init_module and cleanup_module are aliases the module macros add
         * to its init and exit functions: prefer the function's own name. */
        for (size_t i = lo - 1; i > 0 && m->elf_syms[i - 1].addr == f->addr; i--)
                if (streq(f->name, "init_module") || streq(f->name, "cleanup_module"))
                        f = &m->elf_syms[i - 1];
        if (f->size > 0)
                return in_range(addr, f->addr, f->size) ? f : NULL;
        /* No size: it runs to the next symbol, within its section. */
        return s && in_range(f->addr, s->addr, s->len) ? f : NULL;
}

static void resolve_in_module(const layout *l, const layout_module *m, uint64_t addr, layout_hit *hit) {
        const module_section *s = find_section(m, addr);
        const module_symbol *f;
        ksym k;

        *hit = (layout_hit) {
                .module = m,
                .module_name = m->name,
                .section = s ? s->name : NULL,
        };
        /* A data section holds no code: a data symbol of kallsyms (brd's
         * __param_rd_nr, say) would name a function that is not there. */
        if (s && !s->exec) {
                hit->data = true;
                hit->symbol = s->name;
                hit->symbol_addr = s->addr;
                return;
        }
        if (m->syms && kallsyms_lookup(m->syms, addr, &k) >= 0) {
                hit->symbol = k.name;
                hit->symbol_addr = k.addr;
                return;
        }
        if (m->syms_in_kernel_table && l->kernel && kallsyms_lookup(l->kernel, addr, &k) >= 0 &&
            k.module && streq(k.module, m->name)) {
                hit->symbol = k.name;
                hit->symbol_addr = k.addr;
                return;
        }
        f = find_elf_symbol(m, s, addr);
        if (f) {
                hit->symbol = f->name;
                hit->symbol_addr = f->addr;
                return;
        }
        if (s) {
                hit->symbol = s->name;
                hit->symbol_addr = s->addr;
        }
}

/* Whether a module instance covers addr at time_ns (see layout_resolve()). */
static bool module_covers(const layout *l, uint64_t addr, uint64_t time_ns) {
        for (size_t i = l->n_mods; i > 0; i--) {
                const layout_module *m = l->mods[i - 1];

                if (time_ns < m->valid_from_ns || time_ns >= m->unloaded_ns)
                        continue;
                if (in_range(addr, m->base, m->size) || find_code_section(m, addr, time_ns))
                        return true;
        }
        return false;
}

int layout_resolve(const layout *l, uint64_t addr, uint64_t time_ns, layout_hit *ret) {
        const layout_module *by_section = NULL;
        const layout_ksym *dyn;
        ksym k;

        /* Dynamic symbols whose length a record gave first; a length
         * guessed from kallsyms may reach over a module loaded later, so
         * those come after the modules. */
        dyn = ksym_scan(l, addr, 1, covers_at_exact, &(at_time) { addr, time_ns });
        if (!dyn && !module_covers(l, addr, time_ns))
                dyn = ksym_scan(l, addr, 1, covers_at, &(at_time) { addr, time_ns });
        if (dyn) {
                *ret = (layout_hit) {
                        .ksym = dyn,
                        /* "[unknown]" would read as a user frame without a mapping. */
                        .module_name = dyn->type == LAYOUT_KSYM_UNKNOWN ? "ksym" : layout_ksym_type_to_string(dyn->type),
                        .symbol = dyn->name,
                        .symbol_addr = dyn->addr,
                };
                return 0;
        }

        /* Newest first. Within their windows, two instances cannot share
         * core addresses. Outside the core layout only executable sections
         * count, init sections only while the init ran: their memory is
         * reused afterwards. A core match wins over a section match. */
        for (size_t i = l->n_mods; i > 0; i--) {
                const layout_module *m = l->mods[i - 1];

                if (time_ns < m->valid_from_ns || time_ns >= m->unloaded_ns)
                        continue;
                if (in_range(addr, m->base, m->size)) {
                        resolve_in_module(l, m, addr, ret);
                        return 0;
                }
                if (!by_section && find_code_section(m, addr, time_ns))
                        by_section = m;
        }
        if (by_section) {
                resolve_in_module(l, by_section, addr, ret);
                return 0;
        }

        if (!l->kernel || kallsyms_lookup(l->kernel, addr, &k) < 0)
                return -ENOENT;
        /* A line of the start-up table for a module or for dynamic code
         * that nothing tracked covers at this time is stale. */
        if (k.module)
                return -ENOENT;
        *ret = (layout_hit) {
                .module_name = k.module,
                .symbol = k.name,
                .symbol_addr = k.addr,
        };
        return 0;
}
