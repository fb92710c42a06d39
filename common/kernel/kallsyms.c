/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The compact kernel symbol table and the one kallsyms line scanner and
 * _text/_stext finder every reader of kallsyms text uses (kallsyms.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "kernel/kallsyms.h"
#include "macro.h"

/* /proc/kallsyms of a distribution kernel with modules is ~6 MiB (122k
 * lines of at most KSYM_NAME_LEN (512) bytes of name each); 64 MiB leaves
 * ample room while still bounding what a broken file can make us allocate. */
#define KALLSYMS_FILE_MAX_BYTES (64u * 1024u * 1024u)
/* The longest line kallsyms_stream() reads (see there). */
#define KALLSYMS_LINE_MAX 4096

/* Every TOP_STRIDE-th address is copied into a small top-level array that
 * stays in L1 cache; a lookup searches it first and then one block of
 * TOP_STRIDE addresses (512 bytes) instead of the whole 1 MiB array. */
#define TOP_STRIDE 64

/* Module index 0 is the core kernel; modules are 1..KALLSYMS_MODULES_MAX. */
#define KALLSYMS_MODULES_MAX UINT16_MAX

struct kallsyms {
        size_t n;
        uint64_t *addrs;        /* sorted by address, preferred symbol first among equal addresses */
        uint64_t *ends;         /* exclusive end of each symbol, see compute_ends() */
        uint32_t *names;        /* offsets into pool */
        uint16_t *mods;         /* 0 = core kernel, else index + 1 into mod_names */
        char *types;

        char *pool;             /* NUL-terminated names and module names */
        size_t pool_size;

        uint32_t *mod_names;    /* offsets into pool */
        size_t n_mods;

        uint64_t *top;          /* addrs[j * TOP_STRIDE] */
        size_t n_top;

        size_t n_skipped;
};

/* A symbol during parsing, in file order; sorted by (addr, local, index). */
typedef struct sort_entry {
        uint64_t addr;
        uint32_t rank;          /* local << 31 | file index: globals first, then file order */
        uint32_t pad_;
} sort_entry;

static bool sort_entry_le(const sort_entry *a, const sort_entry *b) {
        return a->addr < b->addr || (a->addr == b->addr && a->rank <= b->rank);
}

/* Top-down merge sort of v[0..n) using tmp (same size). The input is mostly
 * sorted already (the core kernel is listed in address order), so the check
 * for halves that are already in order makes the common case linear. */
static void sort_entries(sort_entry *v, sort_entry *tmp, size_t n) {
        size_t mid, i, j, k;

        if (n < 2)
                return;
        if (n <= 16) {
                for (i = 1; i < n; i++) {
                        sort_entry e = v[i];
                        for (j = i; j > 0 && !sort_entry_le(&v[j - 1], &e); j--)
                                v[j] = v[j - 1];
                        v[j] = e;
                }
                return;
        }

        mid = n / 2;
        sort_entries(v, tmp, mid);
        sort_entries(v + mid, tmp, n - mid);
        if (sort_entry_le(&v[mid - 1], &v[mid]))
                return;

        memcpy(tmp, v, mid * sizeof(*v));
        for (i = 0, j = mid, k = 0; i < mid && j < n; k++)
                v[k] = sort_entry_le(&tmp[i], &v[j]) ? tmp[i++] : v[j++];
        while (i < mid)
                v[k++] = tmp[i++];
}

static uint64_t hash_bytes(const char *s, size_t len) {
        /* FNV-1a: module names are short and few. */
        uint64_t h = 0xcbf29ce484222325ULL;

        for (size_t i = 0; i < len; i++) {
                h ^= (uint8_t) s[i];
                h *= 0x100000001b3ULL;
        }
        return h;
}

/* Parsing state shared by the helpers below. */
typedef struct parser {
        kallsyms *k;
        size_t pool_alloc;
        /* Open-addressing table of module indexes (1-based, 0 = empty). */
        uint16_t *mod_slots;
        size_t mod_mask;
        size_t mod_alloc;
        /* The previous line's module: consecutive lines share it. */
        const char *last_mod;
        size_t last_mod_len;
        uint16_t last_mod_index;
} parser;

static uint32_t pool_add(parser *p, const char *s, size_t len) {
        kallsyms *k = p->k;
        uint32_t off = (uint32_t) k->pool_size;

        /* The pool was sized from the input length, see kallsyms_parse(). */
        memcpy(k->pool + k->pool_size, s, len);
        k->pool[k->pool_size + len] = 0;
        k->pool_size += len + 1;
        return off;
}

static int module_grow(parser *p) {
        size_t nslots = p->mod_slots ? (p->mod_mask + 1) * 2 : 64;
        uint16_t *slots;

        slots = calloc(nslots, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < p->k->n_mods; i++) {
                const char *name = p->k->pool + p->k->mod_names[i];
                size_t h = (size_t) hash_bytes(name, strlen(name)) & (nslots - 1);

                while (slots[h])
                        h = (h + 1) & (nslots - 1);
                slots[h] = (uint16_t) (i + 1);
        }
        free(p->mod_slots);
        p->mod_slots = slots;
        p->mod_mask = nslots - 1;
        return 0;
}

/* Returns the 1-based module index for name, adding it if new, 0 if the
 * table is full (the line is then skipped), or a negative errno. */
static int module_index(parser *p, const char *name, size_t len) {
        kallsyms *k = p->k;
        size_t h;
        int r;

        if (p->last_mod && p->last_mod_len == len && memcmp(p->last_mod, name, len) == 0)
                return p->last_mod_index;

        if (!p->mod_slots || (k->n_mods + 1) * 2 > p->mod_mask + 1) {
                r = module_grow(p);
                if (r < 0)
                        return r;
        }

        h = (size_t) hash_bytes(name, len) & p->mod_mask;
        for (;; h = (h + 1) & p->mod_mask) {
                uint16_t idx = p->mod_slots[h];
                const char *s;

                if (idx == 0)
                        break;
                s = k->pool + k->mod_names[idx - 1];
                if (strncmp(s, name, len) == 0 && s[len] == 0) {
                        p->last_mod = name;
                        p->last_mod_len = len;
                        p->last_mod_index = idx;
                        return idx;
                }
        }

        if (k->n_mods >= KALLSYMS_MODULES_MAX)
                return 0;
        if (GREEDY_REALLOC(k->mod_names, p->mod_alloc, k->n_mods + 1) < 0)
                return -ENOMEM;
        k->mod_names[k->n_mods++] = pool_add(p, name, len);
        p->mod_slots[h] = (uint16_t) k->n_mods;
        p->last_mod = name;
        p->last_mod_len = len;
        p->last_mod_index = (uint16_t) k->n_mods;
        return (int) k->n_mods;
}

bool kallsyms_line_parse(const char *s, size_t len, kallsyms_line *ret) {
        const char *e = s + len, *name, *name_end;
        kallsyms_line l = {};
        size_t digits = 0;

        for (; s < e && digits < 17; s++, digits++) {
                int v = unhexchar(*s);
                if (v < 0)
                        break;
                l.addr = l.addr << 4 | (uint64_t) v;
        }
        /* %px prints 16 digits on 64-bit kernels, 8 on 32-bit ones. */
        if (digits == 0 || digits > 16)
                return false;
        if (e - s < 4 || s[0] != ' ' || s[2] != ' ')
                return false;
        l.type = s[1];
        if (l.type <= ' ' || l.type >= 0x7f)
                return false;

        name = s + 3;
        for (name_end = name; name_end < e; name_end++)
                if (*name_end == '\t' || *name_end == ' ' || *name_end == 0)
                        break;
        if (name_end == name)
                return false;
        l.name = name;
        l.name_len = (size_t) (name_end - name);

        if (name_end < e) {
                const char *m = name_end + 1;

                /* Only a tab may follow the name, then the module in brackets
                 * and nothing after it. */
                if (*name_end != '\t' || e - m < 3 || m[0] != '[' || e[-1] != ']')
                        return false;
                m++;
                for (const char *c = m; c < e - 1; c++)
                        if (*c <= ' ' || *c == '[' || *c == ']' || *c >= 0x7f)
                                return false;
                l.module = m;
                l.module_len = (size_t) (e - 1 - m);
        }
        *ret = l;
        return true;
}

static int text_rank(const char *name, size_t len) {
        return len == 5 && memcmp(name, "_text", 5) == 0 ? 2 :
               len == 6 && memcmp(name, "_stext", 6) == 0 ? 1 : 0;
}

int kallsyms_line_text_rank(const kallsyms_line *l) {
        return l->module ? 0 : text_rank(l->name, l->name_len);
}

int kallsyms_text_addr_from_text(const char *text, size_t len, uint64_t *ret_addr) {
        uint64_t best = 0;
        int best_rank = 0;

        for (size_t i = 0; i < len && best_rank < 2;) {
                const char *nl = memchr(text + i, '\n', len - i);
                size_t n = nl ? (size_t) (nl - (text + i)) : len - i;
                kallsyms_line l;
                int rank;

                if (kallsyms_line_parse(text + i, n, &l) && (rank = kallsyms_line_text_rank(&l)) > best_rank) {
                        best = l.addr;
                        best_rank = rank;
                }
                i += n + 1;
        }
        if (best_rank == 0)
                return -ENOENT;
        *ret_addr = best;
        return 0;
}

/* One line of kallsyms_parse(): 1 if it is a symbol (its name and module
 * interned), 0 if it is malformed, negative errno on allocation failure. */
static int parse_line(parser *p, const char *s, size_t len, uint64_t *ret_addr,
                      char *ret_type, uint32_t *ret_name, uint16_t *ret_mod) {
        kallsyms_line l;
        uint16_t mod = 0;

        if (!kallsyms_line_parse(s, len, &l))
                return 0;
        if (l.module) {
                int r = module_index(p, l.module, l.module_len);
                if (r <= 0)
                        return r;
                mod = (uint16_t) r;
        }

        *ret_addr = l.addr;
        *ret_type = l.type;
        *ret_name = pool_add(p, l.name, l.name_len);
        *ret_mod = mod;
        return 1;
}

static bool type_is_absolute(char type) {
        return type == 'A' || type == 'a';
}

static bool type_is_local(char type) {
        return type >= 'a' && type <= 'z';
}

/* Ends for lookups. A symbol ends where the next higher address of the same
 * region starts; the last one of a region covers KALLSYMS_LAST_SYMBOL_MAX_BYTES.
 * Regions are the core kernel, each module (BPF programs are the "bpf"
 * module), and one extra region for absolute symbols (types A/a): those are
 * per-CPU offsets (0x0..0x35000 on x86-64), not code addresses, in the core
 * kernel and in modules alike (kvm's "a" symbols), and must not stretch a
 * module's range down to them or each other's up to the modules. */
static int compute_ends(kallsyms *k) {
        size_t n_regions = k->n_mods + 2, abs_region = k->n_mods + 1;
        _cleanup_free_ uint64_t *next = NULL;
        _cleanup_free_ bool *have = NULL;
        size_t i = k->n;

        next = malloc(n_regions * sizeof(*next));
        have = calloc(n_regions, sizeof(*have));
        if (!next || !have)
                return -ENOMEM;

        while (i > 0) {
                uint64_t a = k->addrs[i - 1];
                size_t g = i - 1;

                while (g > 0 && k->addrs[g - 1] == a)
                        g--;
                for (size_t j = g; j < i; j++) {
                        size_t r = type_is_absolute(k->types[j]) ? abs_region : k->mods[j];

                        if (have[r])
                                k->ends[j] = next[r];
                        else
                                k->ends[j] = a > UINT64_MAX - KALLSYMS_LAST_SYMBOL_MAX_BYTES ?
                                        UINT64_MAX : a + KALLSYMS_LAST_SYMBOL_MAX_BYTES;
                }
                for (size_t j = g; j < i; j++) {
                        size_t r = type_is_absolute(k->types[j]) ? abs_region : k->mods[j];
                        next[r] = a;
                        have[r] = true;
                }
                i = g;
        }
        return 0;
}

int kallsyms_parse(const char *text, size_t len, kallsyms **ret) {
        _cleanup_free_ uint64_t *f_addrs = NULL;
        _cleanup_free_ uint32_t *f_names = NULL;
        _cleanup_free_ uint16_t *f_mods = NULL;
        _cleanup_free_ char *f_types = NULL;
        _cleanup_free_ sort_entry *v = NULL, *tmp = NULL;
        kallsyms *k = NULL;
        size_t n_lines = 1, n = 0, pool_alloc;
        bool nonzero = false;
        parser p = {};
        int r;

        if (!text && len > 0)
                return -EINVAL;

        for (const char *c = text, *e = text + len; c && c < e; c++) {
                c = memchr(c, '\n', (size_t) (e - c));
                if (!c)
                        break;
                n_lines++;
        }
        /* Offsets are 32-bit and ranks keep the file index in 31 bits. */
        if (len >= UINT32_MAX - 1 || n_lines >= INT32_MAX)
                return -E2BIG;

        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        p.k = k;

        /* Every name and module name is copied at most once per line, with
         * a NUL in place of the separator before it, so len + 1 bytes hold
         * the pool. */
        pool_alloc = len + 1;
        k->pool = malloc(pool_alloc);
        f_addrs = malloc(n_lines * sizeof(*f_addrs));
        f_names = malloc(n_lines * sizeof(*f_names));
        f_mods = malloc(n_lines * sizeof(*f_mods));
        f_types = malloc(n_lines);
        if (!k->pool || !f_addrs || !f_names || !f_mods || !f_types) {
                r = -ENOMEM;
                goto fail;
        }

        for (const char *s = text, *e = text + len; s && s < e;) {
                const char *nl = memchr(s, '\n', (size_t) (e - s));
                size_t l = nl ? (size_t) (nl - s) : (size_t) (e - s);

                r = parse_line(&p, s, l, &f_addrs[n], &f_types[n], &f_names[n], &f_mods[n]);
                if (r < 0)
                        goto fail;
                if (r > 0) {
                        if (f_addrs[n] != 0)
                                nonzero = true;
                        n++;
                } else
                        k->n_skipped++;
                s = nl ? nl + 1 : e;
        }

        /* kallsyms shows every address as 0 to readers without
         * CAP_SYSLOG when kptr_restrict is set (kallsyms_show_value()): such
         * a table cannot symbolize anything. */
        if (n > 0 && !nonzero) {
                r = -EPERM;
                goto fail;
        }

        v = malloc(MAX(n, 1u) * sizeof(*v));
        tmp = malloc(MAX(n, 1u) * sizeof(*tmp));
        k->addrs = malloc(MAX(n, 1u) * sizeof(*k->addrs));
        k->ends = malloc(MAX(n, 1u) * sizeof(*k->ends));
        k->names = malloc(MAX(n, 1u) * sizeof(*k->names));
        k->mods = malloc(MAX(n, 1u) * sizeof(*k->mods));
        k->types = malloc(MAX(n, 1u));
        k->n_top = (n + TOP_STRIDE - 1) / TOP_STRIDE;
        k->top = malloc(MAX(k->n_top, 1u) * sizeof(*k->top));
        if (!v || !tmp || !k->addrs || !k->ends || !k->names || !k->mods || !k->types || !k->top) {
                r = -ENOMEM;
                goto fail;
        }

        /* Stable order by address; at equal addresses a global symbol
         * (uppercase type) sorts before local ones, otherwise file order
         * decides. Lookups return the first of a group, so "_text" style
         * aliases resolve to the global name. */
        for (size_t i = 0; i < n; i++)
                v[i] = (sort_entry) {
                        .addr = f_addrs[i],
                        .rank = (uint32_t) i | (type_is_local(f_types[i]) ? UINT32_C(1) << 31 : 0),
                };
        sort_entries(v, tmp, n);

        for (size_t i = 0; i < n; i++) {
                uint32_t j = v[i].rank & ~(UINT32_C(1) << 31);

                k->addrs[i] = f_addrs[j];
                k->names[i] = f_names[j];
                k->mods[i] = f_mods[j];
                k->types[i] = f_types[j];
        }
        k->n = n;
        for (size_t j = 0; j < k->n_top; j++)
                k->top[j] = k->addrs[j * TOP_STRIDE];

        r = compute_ends(k);
        if (r < 0)
                goto fail;

        /* Give back what the pool estimate over-allocated (most of it). */
        if (k->pool_size > 0 && k->pool_size < pool_alloc) {
                char *shrunk = realloc(k->pool, k->pool_size);
                if (shrunk)
                        k->pool = shrunk;
        }

        free(p.mod_slots);
        *ret = k;
        return 0;

fail:
        free(p.mod_slots);
        kallsyms_free(k);
        return r;
}

int kallsyms_load(const char *root, kallsyms **ret) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        int r;

        r = read_full_file_at(root, "proc/kallsyms", KALLSYMS_FILE_MAX_BYTES, &text, &size);
        if (r < 0)
                return r;
        return kallsyms_parse(text, size, ret);
}

int kallsyms_stream(const char *root, int (*cb)(const kallsyms_line *l, void *userdata), void *userdata) {
        _cleanup_free_ char *path = path_join(root, "proc/kallsyms");
        _cleanup_fclose_ FILE *f = NULL;
        /* A line of kallsyms is an address, a type, a name of at most
         * KSYM_NAME_LEN (512) and a module's; a longer one is none, and
         * is skipped without being held. (getline() held it whole, and
         * took a failure to grow its buffer for the end of the file.) */
        char line[KALLSYMS_LINE_MAX];
        size_t total = 0;

        if (!path || !cb)
                return path ? -EINVAL : -ENOMEM;
        f = fopen(path, "re");
        if (!f)
                return negative_errno();
        for (;;) {
                kallsyms_line l;
                size_t len = 0;
                bool too_long = false;
                int c;

                while ((c = getc_unlocked(f)) != EOF && c != '\n') {
                        if (len < sizeof line)
                                line[len++] = (char) c;
                        else
                                too_long = true;
                        if (++total > KALLSYMS_FILE_MAX_BYTES)
                                return -EFBIG;
                }
                if (c == '\n' && ++total > KALLSYMS_FILE_MAX_BYTES)
                        return -EFBIG;
                if (!too_long && len > 0 && kallsyms_line_parse(line, len, &l)) {
                        int r = cb(&l, userdata);
                        if (r < 0)
                                return r;
                }
                if (c == EOF)
                        break;
        }
        if (ferror(f))
                return -EIO;
        return 0;
}

int kallsyms_parse_module(const char *text, size_t len, const char *module, kallsyms **ret) {
        _cleanup_free_ char *sel = NULL;
        char tag[80];
        size_t tag_len, n = 0;

        if ((!text && len > 0) || !module || !ret)
                return -EINVAL;
        /* A module's lines end in "\t[NAME]" (kernel/kallsyms.c s_show()). */
        tag_len = (size_t) snprintf(tag, sizeof tag, "\t[%s]", module);
        if (tag_len >= sizeof tag)
                return -EINVAL;

        sel = malloc(len + 1);
        if (!sel)
                return -ENOMEM;
        for (const char *c = text, *e = text + len; c < e;) {
                const char *nl = memchr(c, '\n', (size_t) (e - c));
                const char *end = nl ?: e;
                size_t l = (size_t) (end - c);

                if (l >= tag_len && memcmp(end - tag_len, tag, tag_len) == 0) {
                        memcpy(sel + n, c, l);
                        n += l;
                        sel[n++] = '\n';
                }
                c = nl ? nl + 1 : e;
        }
        return kallsyms_parse(sel, n, ret);
}

kallsyms *kallsyms_free(kallsyms *k) {
        if (!k)
                return NULL;
        free(k->addrs);
        free(k->ends);
        free(k->names);
        free(k->mods);
        free(k->types);
        free(k->pool);
        free(k->mod_names);
        free(k->top);
        free(k);
        return NULL;
}

size_t kallsyms_count(const kallsyms *k) {
        return k ? k->n : 0;
}

size_t kallsyms_n_skipped(const kallsyms *k) {
        return k ? k->n_skipped : 0;
}

/* Index of the last element of a[0..n) that is <= x; requires n >= 1 and
 * a[0] <= x. Branch-free halving so the compiler emits conditional moves. */
static inline size_t last_le(const uint64_t *a, size_t n, uint64_t x) {
        const uint64_t *base = a;

        while (n > 1) {
                size_t half = n / 2;

                base = base[half] <= x ? base + half : base;
                n -= half;
        }
        return (size_t) (base - a);
}

static void fill_ksym(const kallsyms *k, size_t i, ksym *ret) {
        *ret = (ksym) {
                .addr = k->addrs[i],
                .end = k->ends[i],
                .name = k->pool + k->names[i],
                .module = k->mods[i] ? k->pool + k->mod_names[k->mods[i] - 1] : NULL,
                .type = k->types[i],
        };
}

int kallsyms_lookup(const kallsyms *k, uint64_t addr, ksym *ret) {
        size_t j, b, i;

        if (!k || k->n == 0 || addr < k->addrs[0])
                return -ENOENT;

        j = last_le(k->top, k->n_top, addr);
        b = j * TOP_STRIDE;
        i = b + last_le(k->addrs + b, MIN(k->n - b, (size_t) TOP_STRIDE), addr);

        /* Several symbols at one address: the first of the group is the
         * preferred one (see the sort order in kallsyms_parse()). */
        if (i > 0 && k->addrs[i - 1] == k->addrs[i]) {
                size_t lo = 0, hi = i;  /* first index with addrs[] == addrs[i] */

                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (k->addrs[mid] < k->addrs[i])
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                i = lo;
        }

        if (addr >= k->ends[i])
                return -ENOENT;

        if (ret)
                fill_ksym(k, i, ret);
        return 0;
}

int kallsyms_get(const kallsyms *k, size_t i, ksym *ret) {
        if (!k || i >= k->n)
                return -ENOENT;
        if (ret)
                fill_ksym(k, i, ret);
        return 0;
}

int kallsyms_find(const kallsyms *k, const char *name, uint64_t *ret_addr) {
        if (!k || !name)
                return -ENOENT;

        for (size_t i = 0; i < k->n; i++)
                if (k->mods[i] == 0 && strcmp(k->pool + k->names[i], name) == 0) {
                        if (ret_addr)
                                *ret_addr = k->addrs[i];
                        return 0;
                }
        return -ENOENT;
}

int kallsyms_text_addr(const kallsyms *k, uint64_t *ret_addr) {
        int best_rank = 0;

        /* The lowest address of the best rank: the table is in address order. */
        for (size_t i = 0; k && i < k->n && best_rank < 2; i++) {
                const char *name = k->pool + k->names[i];
                int rank = k->mods[i] == 0 ? text_rank(name, strlen(name)) : 0;

                if (rank > best_rank) {
                        best_rank = rank;
                        if (ret_addr)
                                *ret_addr = k->addrs[i];
                }
        }
        return best_rank > 0 ? 0 : -ENOENT;
}

size_t kallsyms_memory_bytes(const kallsyms *k) {
        size_t per_symbol = sizeof(uint64_t) * 2 + sizeof(uint32_t) + sizeof(uint16_t) + 1;

        if (!k)
                return 0;
        return sizeof(*k) + k->n * per_symbol + k->pool_size +
                k->n_mods * sizeof(uint32_t) + k->n_top * sizeof(uint64_t);
}
