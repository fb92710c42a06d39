/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The symbolizer (symbolizer.h): call chains to interned frames and
 * stacks, with the caches that make a repeated chain one lookup. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "idcache.h"
#include "macro.h"
#include "pathcache.h"
#include "perf/jitmaps.h"
#include "symbolizer.h"
#include "timeparse.h"

/* User addresses lie below, kernel ones above, on the 64-bit architectures
 * that split one address space (x86-64: user below 2^47, or 2^56 with
 * 5-level paging, kernel from 0xff00000000000000). */
#define USER_ADDR_END (UINT64_C(1) << 63)
/* Not a perf context marker (those are -1..-4095): the rest of a user
 * call chain that went astray, dropped. */
#define CONTEXT_INVALID_USER UINT64_C(1)
/* User frames by (file, offset): the hot ones of a busy machine fit; the
 * table (24 bytes a slot, at most half full) stays within 1.5 MiB. */
#define UFILE_CACHE_MAX_ENTRIES (32 * 1024)
/* Files' string ids by (file id, which): the files of a busy machine's
 * samples. */
#define UFILE_STRINGS_MAX_ENTRIES (4 * 1024)
/* Kernel frames by (address, epoch): a kernel's hot code, within 3 MiB. */
#define KFRAME_CACHE_MAX_ENTRIES (64 * 1024)
/* Kernel symbols' string ids by the symbol: the functions whose new
 * addresses a busy machine's samples hit. */
#define KSYM_STRINGS_MAX_ENTRIES (8 * 1024)
/* Modules' string ids: the modules loaded, and the kernel. */
#define KMOD_STRINGS_MAX_ENTRIES 1024
/* JIT frames by (map version, address). */
#define JIT_CACHE_MAX_ENTRIES (32 * 1024)
/* Comms: far fewer than this are running at once. */
#define COMM_CACHE_MAX_ENTRIES 4096
/* Resolved frame ids of a whole chain -> stack id. Its keys are up to
 * ~1 KiB: it is bounded by bytes (table and keys), or a churning
 * machine's stacks would fill hundreds of MB; its entries are as many as
 * that table holds (16,384 at 4 MiB). */
#define PATH_CACHE_MAX_BYTES (4 * 1024 * 1024)
/* Files announced to the user file handler, by file id; forgotten (and
 * announced again, which the handler finds cheap) past this many. */
#define UFILE_SEEN_MAX (64 * 1024)

struct symbolizer {
        store *store;
        layout *layout;
        tasks *tasks;
        char kernel_build_id[BUILD_ID_HEX_MAX];

        symbolizer_miss_handler miss_cb;
        void *miss_userdata;
        bool miss_handled;      /* the handler ran in this pass */
        symbolizer_user_file_handler file_cb;
        void *file_userdata;
        hashmap *ufile_seen;    /* file ids announced to file_cb */
        jitmaps *jit;

        uint64_t layout_gen;    /* the generation the caches below were filled in */
        uint32_t epoch;         /* layout_epoch() of the sample being resolved */
        uint64_t store_gen;     /* the store's dictionary generation the caches hold ids of */
        uint64_t store_epoch;   /* and its store_epoch() */

        /* (kernel address, layout epoch) -> interned frame id, valid for
         * one layout generation */
        idcache *kframe_cache;
        /* (file id of the tasks table, file offset) -> interned frame id
         * of a user frame in a file, and the id of the stack of that one
         * frame (0: not interned yet): most chains of programs built
         * without frame pointers are their sampled IP alone */
        idcache *ufile_cache;
        /* The key and stack id of the last user frame found through
         * ufile_cache in this chain */
        bool ufile_last;
        uint64_t ufile_last_file, ufile_last_offset;
        int64_t ufile_last_stack;
        /* (file id, UFILE_PATH or UFILE_BUILD_ID) -> the string id of its
         * path or build-id (0: none): a new offset of a file is a frame
         * of known strings (store_intern_file_frame()) */
        idcache *ufile_strings;
        /* (symbol name pointer of the layout, 0) -> string id of the
         * name, and (module name pointer, module instance pointer) ->
         * string id of "[name]" and, aux, of its build-id (0: none): a new
         * address in a known function is a frame of known strings.
         * Pointers into the layout are valid for one generation. */
        idcache *ksym_strings;
        idcache *kmod_strings;
        /* a comm of up to 15 bytes, as two words -> its string id */
        idcache *comm_cache;
        /* (jitmaps_version() of the process's map, address) -> interned
         * frame id of a JIT frame its map names */
        idcache *jit_cache;
        /* A chain -> its stack id: a chain seen before, in this process
         * or another (other addresses, same code), is one lookup instead
         * of one per stack node. User frames are in the key by their
         * resolved ids; kernel frames by their addresses and the layout
         * epoch (see chain_key_mark()), for a kernel frame is its address in
         * an epoch: a hit resolves none of them. There is no cache by raw
         * user addresses: on a machine that starts processes all the
         * time, they (pid, ASLR) rarely repeat (8.6 % of samples' chains
         * on bench/workload.sh mixed), and probing and filling such a
         * cache cost more than it saved (bench/RESULTS.md). */
        pathcache *path_cache;

        /* scratch, callchain_depth + slack: the chain's frame ids (0: a
         * kernel frame not resolved yet) and its path_cache key */
        int64_t *frame_ids, *chain_key;
        size_t frame_ids_alloc, chain_key_alloc;

        symbolizer_stats stats;
};

int symbolizer_new(store *st, layout *l, tasks *t, symbolizer **ret) {
        symbolizer *s;
        int r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->store = st;
        s->layout = l;
        s->tasks = t;
        r = idcache_new(KFRAME_CACHE_MAX_ENTRIES, &s->kframe_cache);
        if (r >= 0)
                r = idcache_new_aux(UFILE_CACHE_MAX_ENTRIES, &s->ufile_cache);
        if (r >= 0)
                r = idcache_new(UFILE_STRINGS_MAX_ENTRIES, &s->ufile_strings);
        if (r >= 0)
                r = idcache_new(KSYM_STRINGS_MAX_ENTRIES, &s->ksym_strings);
        if (r >= 0)
                r = idcache_new_aux(KMOD_STRINGS_MAX_ENTRIES, &s->kmod_strings);
        if (r >= 0)
                r = idcache_new(COMM_CACHE_MAX_ENTRIES, &s->comm_cache);
        if (r >= 0)
                r = idcache_new(JIT_CACHE_MAX_ENTRIES, &s->jit_cache);
        if (r >= 0)
                r = hashmap_new(&s->ufile_seen);
        if (r >= 0)
                r = pathcache_new(SIZE_MAX, PATH_CACHE_MAX_BYTES, &s->path_cache);
        if (r < 0) {
                symbolizer_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

symbolizer *symbolizer_free(symbolizer *s) {
        if (!s)
                return NULL;
        idcache_free(s->kframe_cache);
        idcache_free(s->ufile_cache);
        idcache_free(s->ufile_strings);
        idcache_free(s->ksym_strings);
        idcache_free(s->kmod_strings);
        idcache_free(s->comm_cache);
        idcache_free(s->jit_cache);
        hashmap_free(s->ufile_seen);
        pathcache_free(s->path_cache);
        free(s->frame_ids);
        free(s->chain_key);
        free(s);
        return NULL;
}

void symbolizer_set_kernel_build_id(symbolizer *s, const char *build_id) {
        snprintf(s->kernel_build_id, sizeof s->kernel_build_id, "%s", build_id ?: "");
        idcache_clear(s->kmod_strings);
}

void symbolizer_set_miss_handler(symbolizer *s, symbolizer_miss_handler cb, void *userdata) {
        s->miss_cb = cb;
        s->miss_userdata = userdata;
}

void symbolizer_set_user_file_handler(symbolizer *s, symbolizer_user_file_handler cb, void *userdata) {
        s->file_cb = cb;
        s->file_userdata = userdata;
}

void symbolizer_set_jitmaps(symbolizer *s, jitmaps *j) {
        s->jit = j;
}

void symbolizer_new_pass(symbolizer *s) {
        s->miss_handled = false;
}

const symbolizer_stats *symbolizer_get_stats(const symbolizer *s) {
        return &s->stats;
}

size_t symbolizer_cache_bytes(const symbolizer *s) {
        return idcache_memory_bytes(s->kframe_cache) + idcache_memory_bytes(s->ufile_cache) +
               idcache_memory_bytes(s->ufile_strings) + idcache_memory_bytes(s->ksym_strings) +
               idcache_memory_bytes(s->kmod_strings) + idcache_memory_bytes(s->comm_cache) +
               idcache_memory_bytes(s->jit_cache) + hashmap_memory_bytes(s->ufile_seen) +
               pathcache_memory_bytes(s->path_cache);
}

size_t symbolizer_buffer_bytes(const symbolizer *s) {
        return (s->frame_ids_alloc + s->chain_key_alloc) * sizeof *s->frame_ids;
}

void symbolizer_forget_ids(symbolizer *s) {
        idcache_clear(s->kframe_cache);
        idcache_clear(s->ufile_cache);
        idcache_clear(s->ufile_strings);
        idcache_clear(s->ksym_strings);
        idcache_clear(s->kmod_strings);
        idcache_clear(s->comm_cache);
        idcache_clear(s->jit_cache);
        pathcache_clear(s->path_cache);
}

/* Cached resolutions are only valid for the layout generation they were
 * made in. Returns true if they were dropped. */
static bool check_layout(symbolizer *s) {
        if (layout_generation(s->layout) == s->layout_gen)
                return false;
        idcache_clear(s->kframe_cache);
        idcache_clear(s->ksym_strings);
        idcache_clear(s->kmod_strings);
        pathcache_clear(s->path_cache);
        s->layout_gen = layout_generation(s->layout);
        return true;
}

/* Ids of an older generation, or of a batch the store rolled back (its
 * caller may not know yet: sqlite rolls back on its own after some
 * errors), must not be used again. */
static void check_store(symbolizer *s) {
        if (store_generation(s->store) == s->store_gen && store_epoch(s->store) == s->store_epoch)
                return;
        symbolizer_forget_ids(s);
        s->store_gen = store_generation(s->store);
        s->store_epoch = store_epoch(s->store);
}

/* The string id of a kernel symbol's name, of its module's "[name]" and
 * of the module's build-id (0: none), by the layout's pointers. A hit in
 * a data section is named by its place, "[brd] .orc_unwind+0x2f0"; those
 * names are not cached. */
static int kernel_frame_strings(symbolizer *s, uint64_t ip, const layout_hit *hit, int64_t *ret_symbol,
                                int64_t *ret_module, int64_t *ret_build_id) {
        uint64_t name_key = (uintptr_t) hit->module_name, mod_key = (uintptr_t) hit->module;
        int r;

        *ret_symbol = 0;
        if (hit->data) {
                char data[256];

                snprintf(data, sizeof data, "%s+0x%" PRIx64, hit->symbol, ip - hit->symbol_addr);
                r = store_intern_string(s->store, data, ret_symbol);
                if (r < 0)
                        return r;
        } else if (hit->symbol && !idcache_get(s->ksym_strings, (uintptr_t) hit->symbol, 0, ret_symbol)) {
                r = store_intern_string(s->store, hit->symbol, ret_symbol);
                if (r < 0)
                        return r;
                (void) idcache_put(s->ksym_strings, (uintptr_t) hit->symbol, 0, *ret_symbol);
        }
        if (idcache_get_aux(s->kmod_strings, name_key, mod_key, ret_module, ret_build_id))
                return 0;

        char module[MODULE_NAME_MAX + 2];
        const char *build_id = NULL;

        if (hit->module_name) {
                snprintf(module, sizeof module, "[%s]", hit->module_name);
                if (hit->module && hit->module->build_id[0])
                        build_id = hit->module->build_id;
        } else {
                snprintf(module, sizeof module, "%s", MODULE_KERNEL);
                build_id = s->kernel_build_id[0] ? s->kernel_build_id : NULL;
        }
        r = store_intern_string(s->store, module, ret_module);
        if (r >= 0 && build_id)
                r = store_intern_string(s->store, build_id, ret_build_id);
        else
                *ret_build_id = 0;
        if (r < 0)
                return r;
        if (idcache_put(s->kmod_strings, name_key, mod_key, *ret_module) >= 0)
                (void) idcache_set_aux(s->kmod_strings, name_key, mod_key, *ret_build_id);
        return 0;
}

/* The frame of a resolved kernel address: what store_intern_frame()
 * makes of its strings, by their ids. */
static int kernel_frame_by_ids(symbolizer *s, uint64_t ip, const layout_hit *hit, int64_t *ret) {
        int64_t symbol_id, module_id, build_id_id;
        int r;

        if (hit->module_name && hit->module)
                s->stats.module_frames++;
        if (hit->data)
                s->stats.module_data_frames++;
        r = kernel_frame_strings(s, ip, hit, &symbol_id, &module_id, &build_id_id);
        if (r < 0)
                return r;
        return store_intern_kernel_frame(s->store, ip, symbol_id, hit->symbol ? ip - hit->symbol_addr : 0, module_id,
                                         build_id_id, ret);
}

static int kernel_frame_id(symbolizer *s, uint64_t ip, uint64_t time, int64_t *ret) {
        uint64_t epoch = s->epoch;
        layout_hit hit;
        int r;

        if (idcache_get(s->kframe_cache, ip, epoch, ret))
                return 0;

        r = layout_resolve(s->layout, ip, time, &hit);
        if (r < 0 && s->miss_cb && !s->miss_handled) {
                s->miss_handled = true;
                s->miss_cb(s->miss_userdata);
                if (check_layout(s)) {
                        s->epoch = layout_epoch(s->layout, time);
                        epoch = s->epoch;
                }
                r = layout_resolve(s->layout, ip, time, &hit);
        }
        if (r >= 0)
                r = kernel_frame_by_ids(s, ip, &hit, ret);
        else {
                /* Nothing in the layout: the bare address, no strings. */
                s->stats.unresolved_kernel_frames++;
                r = store_intern_kernel_frame(s->store, ip, 0, 0, 0, 0, ret);
        }
        if (r < 0)
                return r;
        return idcache_put(s->kframe_cache, ip, epoch, *ret);
}

enum { UFILE_PATH, UFILE_BUILD_ID };

/* The string id of a file's path or build-id ("": 0). */
static int ufile_string(symbolizer *s, uint64_t file_id, unsigned which, const char *str, int64_t *ret) {
        int r;

        if (which == UFILE_BUILD_ID && !str[0]) {
                *ret = 0;
                return 0;
        }
        if (idcache_get(s->ufile_strings, file_id, which, ret))
                return 0;
        r = store_intern_string(s->store, str, ret);
        if (r < 0)
                return r;
        return idcache_put(s->ufile_strings, file_id, which, *ret);
}

/* 1 (and no frame) for a return address that cannot be one: outside
 * every executable mapping of a process whose mappings are known. */
static int user_frame_id(symbolizer *s, uint32_t pid, uint64_t ip, bool return_address, int64_t *ret) {
        frame f = { .kind = FRAME_USER, .addr = ip };
        mapping m;
        int r;

        if (tasks_find_mapping(s->tasks, pid, ip, &m) < 0) {
                if (return_address && tasks_n_mappings(s->tasks, pid) > 0)
                        return 1;
                s->stats.user_frames_unknown++;
                return store_intern_frame(s->store, &f, ret);
        }
        f.module = m.path;
        f.offset = m.pgoff + (ip - m.start);
        f.build_id = m.build_id[0] ? m.build_id : NULL;
        /* A file's code is the same frame in every process that maps it,
         * wherever ASLR put it: keyed by the file, its build-id and the
         * file offset, not by the process's address. Anonymous memory
         * ("", "[heap]", "//anon") has no such identity. */
        if (!m.path || m.path[0] != '/' || m.path[1] == '/') {
                /* JIT code: named from the process's map, if it has one. */
                if (s->jit && m.path && (streq(m.path, "//anon") || strncmp(m.path, "[anon", 5) == 0)) {
                        uint64_t start, version;
                        const char *name;

                        /* What this version of the map named before. */
                        if (jitmaps_version(s->jit, pid, &version) && idcache_get(s->jit_cache, version, ip, ret)) {
                                s->stats.jit_frames++;
                                return 0;
                        }
                        name = jitmaps_lookup(s->jit, pid, ip, clock_ns(CLOCK_MONOTONIC), &start);
                        if (name) {
                                f.symbol = name;
                                f.offset = ip - start;
                                s->stats.jit_frames++;
                                r = store_intern_frame(s->store, &f, ret);
                                if (r < 0 || !jitmaps_version(s->jit, pid, &version))
                                        return r;
                                /* Only named frames are cached: one the map
                                 * does not name yet is looked up again at its
                                 * next sample, and may be named by then. */
                                return idcache_put(s->jit_cache, version, ip, *ret);
                        }
                }
                if (!f.symbol)
                        s->stats.user_frames_unknown++;
                return store_intern_frame(s->store, &f, ret);
        }
        if (f.build_id)
                s->stats.user_frames_build_id++;
        else
                s->stats.user_frames_no_build_id++;

        s->ufile_last = true;
        s->ufile_last_file = m.file_id;
        s->ufile_last_offset = f.offset;
        s->ufile_last_stack = 0;
        /* Two numbers instead of the frame's path and build-id. */
        if (idcache_get_aux(s->ufile_cache, m.file_id, f.offset, ret, &s->ufile_last_stack))
                return 0;
        int64_t path_id, build_id_id;
        r = ufile_string(s, m.file_id, UFILE_PATH, m.path, &path_id);
        if (r >= 0)
                r = ufile_string(s, m.file_id, UFILE_BUILD_ID, m.build_id, &build_id_id);
        if (r >= 0)
                r = store_intern_file_frame(s->store, f.offset, path_id, build_id_id, ret);
        if (r < 0)
                return r;
        if (s->file_cb && f.build_id) {
                int64_t unused;

                if (hashmap_get_u64(s->ufile_seen, m.file_id, &unused) < 0) {
                        if (hashmap_size(s->ufile_seen) >= UFILE_SEEN_MAX)
                                hashmap_clear(s->ufile_seen);
                        if (s->file_cb(pid, m.path, f.build_id, s->file_userdata))
                                (void) hashmap_put_u64(s->ufile_seen, m.file_id, 1);
                }
        }
        return idcache_put(s->ufile_cache, m.file_id, f.offset, *ret);
}

/* The path_cache key of a chain of n entries, k of them kernel addresses
 * (in the upper half: negative as int64_t): two markers, then the
 * entries, addresses for those and frame ids (positive) for the others.
 * The markers are negative and small, so no chain of frame ids alone is
 * such a key, and an entry's sign says what it is. */
#define CHAIN_KEY_MARKERS 2
static void chain_key_mark(symbolizer *s, size_t k) {
        s->chain_key[0] = -1 - (int64_t) (s->epoch & INT32_MAX);
        s->chain_key[1] = -1 - (int64_t) k;
}

/* Resolves the kernel entries the chain's loop left at 0. */
static int resolve_kernel_entries(symbolizer *s, const perf_sample *ps, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (s->frame_ids[i] == 0) {
                        int r = kernel_frame_id(s, (uint64_t) s->chain_key[CHAIN_KEY_MARKERS + i], ps->time,
                                                &s->frame_ids[i]);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int symbolizer_stack(symbolizer *s, const perf_sample *ps, int64_t *ret_stack, int64_t *ret_leaf_frame) {
        /* Entries are attributed to the context of the last marker seen. */
        uint64_t context = ps->user ? PERF_CONTEXT_USER : PERF_CONTEXT_KERNEL;
        size_t n = 0, k = 0, need = ps->nr + 1;
        int64_t stack = 0;
        int r;

        check_layout(s);
        check_store(s);
        s->epoch = layout_epoch(s->layout, ps->time);
        s->ufile_last = false;
        uint64_t layout_gen = s->layout_gen;

        if (GREEDY_REALLOC(s->frame_ids, s->frame_ids_alloc, need) < 0 ||
            GREEDY_REALLOC(s->chain_key, s->chain_key_alloc, need + CHAIN_KEY_MARKERS) < 0)
                return -ENOMEM;

        if (ps->nr == 0) {
                r = context == PERF_CONTEXT_KERNEL ? kernel_frame_id(s, ps->ip, ps->time, &s->frame_ids[n])
                                                   : user_frame_id(s, ps->pid, ps->ip, false, &s->frame_ids[n]);
                if (r < 0)
                        return r;
                n++;
        }

        int64_t *key = s->chain_key + CHAIN_KEY_MARKERS;
        unsigned user_entries = 0;
        for (uint64_t i = 0; i < ps->nr; i++) {
                uint64_t ip;

                memcpy(&ip, &ps->ips[i], sizeof ip);
                if (perf_callchain_is_context(ip)) {
                        context = ip;
                        continue;
                }
                /* The kernel walks a user stack by its frame pointers and
                 * takes whatever lies beside each saved one for a return
                 * address, unchecked (perf_callchain_user()). Where the
                 * program keeps no frame pointers, that is any value on its
                 * stack: perfsnapd's own stack holds the module addresses it
                 * just parsed from sysfs. An entry in the kernel's half of
                 * the address space is no user return address, and the
                 * entries after it come from the same bogus frame. */
                if (context == PERF_CONTEXT_USER && ip >= USER_ADDR_END)
                        context = CONTEXT_INVALID_USER;
                if (context == PERF_CONTEXT_KERNEL && (int64_t) ip < 0) {
                        /* Resolved after the loop, unless the chain is
                         * cached. */
                        s->frame_ids[n] = 0;
                        key[n] = (int64_t) ip;
                        k++;
                        s->stats.kernel_frames++;
                        n++;
                        continue;
                }
                if (context == PERF_CONTEXT_KERNEL) {
                        /* No kernel address (a record made up): in the
                         * key by its frame id, as the key's negative
                         * entries are kernel addresses alone. */
                        r = kernel_frame_id(s, ip, ps->time, &s->frame_ids[n]);
                        s->stats.kernel_frames++;
                } else if (context == PERF_CONTEXT_USER) {
                        /* Likewise an entry outside all executable code:
                         * a frame-pointer walk through code built without
                         * them reads whatever the stack holds. The first
                         * entry is the sampled IP, from the registers. */
                        r = user_frame_id(s, ps->pid, ip, user_entries++ > 0, &s->frame_ids[n]);
                        if (r == 1) {
                                context = CONTEXT_INVALID_USER;
                                s->stats.invalid_user_frames++;
                                continue;
                        }
                        s->stats.user_frames++;
                } else {
                        if (context == CONTEXT_INVALID_USER)
                                s->stats.invalid_user_frames++;
                        continue;       /* and guest contexts: not ours to resolve */
                }
                if (r < 0)
                        return r;
                key[n] = s->frame_ids[n];
                n++;
        }

        /* The same frames in another process (same binaries, other
         * addresses) make the same stack: one lookup instead of one per
         * node. Else stacks are interned outermost caller first. A chain
         * of one frame (a user sample whose caller chain was cut: most
         * of them where programs keep no frame pointers) is one lookup in
         * the stack dictionary, as in the cache, and is left out of the
         * cache it would crowd. */
        bool cached = n > 1;
        /* The one frame is a user frame of a file: its stack id, if
         * known, is beside its own in ufile_cache. (Any frame found there
         * added one to n.) */
        bool one_ufile = n == 1 && s->ufile_last;
        /* The key: with kernel entries, by their addresses (markers
         * first); else the frame ids. */
        const int64_t *path = k > 0 ? s->chain_key : s->frame_ids;
        size_t path_len = k > 0 ? n + CHAIN_KEY_MARKERS : n;

        bool hit = false;

        if (k > 0)
                chain_key_mark(s, k);
        if (cached && pathcache_get(s->path_cache, path, path_len, &stack)) {
                hit = true;
                /* The leaf, if a kernel frame: one lookup, not one a frame.
                 * If that read the layout again (a miss), the stack found
                 * may be of the generation before: interned anew. */
                if (ret_leaf_frame && s->frame_ids[0] == 0) {
                        r = kernel_frame_id(s, (uint64_t) key[0], ps->time, &s->frame_ids[0]);
                        if (r < 0)
                                return r;
                        hit = s->layout_gen == layout_gen;
                }
        }
        if (n == 0)
                stack = 0;      /* no frames: no stack */
        else if (hit)
                s->stats.stack_cache_hits++;
        else if (one_ufile && s->ufile_last_stack > 0)
                stack = s->ufile_last_stack;
        else {
                r = resolve_kernel_entries(s, ps, n);
                if (r < 0)
                        return r;
                stack = 0;
                for (size_t i = n; i > 0; i--) {
                        r = store_intern_stack(s->store, stack, s->frame_ids[i - 1], &stack);
                        if (r < 0)
                                return r;
                }
                /* A cache: a chain it cannot hold is interned again next
                 * time. A chain whose frames were resolved partly before
                 * the layout was read again (a miss) may hold frames of
                 * two generations: not cached under the new one's epoch,
                 * where its addresses name other frames. */
                if (cached && s->layout_gen == layout_gen)
                        (void) pathcache_put(s->path_cache, path, path_len, stack);
                else if (one_ufile)
                        (void) idcache_set_aux(s->ufile_cache, s->ufile_last_file, s->ufile_last_offset, stack);
        }

        *ret_stack = stack;
        if (ret_leaf_frame)
                *ret_leaf_frame = n > 0 ? s->frame_ids[0] : 0;
        return 0;
}

int symbolizer_comm_id(symbolizer *s, const char *comm, int64_t *ret_id) {
        uint64_t w[2] = {};
        size_t len = strnlen(comm, sizeof w);
        int r;

        /* A kernel comm is at most 15 bytes: two words, NUL padded. */
        if (len == sizeof w)
                return store_intern_string(s->store, comm, ret_id);
        memcpy(w, comm, len);
        check_store(s);
        if (idcache_get(s->comm_cache, w[0], w[1], ret_id))
                return 0;
        r = store_intern_string(s->store, comm, ret_id);
        if (r < 0)
                return r;
        return idcache_put(s->comm_cache, w[0], w[1], *ret_id);
}
