/* SPDX-License-Identifier: GPL-2.0-or-later */
/* JIT symbol maps (jitmaps.h): read incrementally per process, looked up
 * by address. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hashmap.h"
#include "macro.h"
#include "perf/jitmaps.h"

#define READ_MAX_BYTES (16u * 1024u * 1024u)    /* per re-read */
#define OVERLAP_SCAN 16                         /* earlier entries looked at for a later overlapping one */

typedef struct jit_entry {
        uint64_t start, size;
        uint32_t seq;           /* line number: later wins */
        uint32_t name;          /* offset in names */
} jit_entry;

typedef struct jit_proc {
        uint32_t pid;
        bool absent;            /* no readable map at the last look */
        uint64_t pos;           /* bytes of the file taken */
        uint64_t checked_ns;
        uint64_t used;          /* j->clock at the last lookup */
        jit_entry *v;           /* sorted by start, then seq */
        size_t n, alloc;
        char *names;
        size_t names_size, names_alloc;
} jit_proc;

struct jitmaps {
        char *root;
        hashmap *procs;         /* pid -> jit_proc * */
        uint64_t clock;
        jitmaps_stats stats;
};

static void proc_free(jit_proc *p) {
        if (!p)
                return;
        free(p->v);
        free(p->names);
        free(p);
}

int jitmaps_new(const char *root, jitmaps **ret) {
        jitmaps *j = calloc(1, sizeof *j);

        if (!j)
                return -ENOMEM;
        j->root = strdup(root ?: "/");
        if (!j->root || hashmap_new(&j->procs) < 0) {
                jitmaps_free(j);
                return -ENOMEM;
        }
        *ret = j;
        return 0;
}

jitmaps *jitmaps_free(jitmaps *j) {
        int64_t v;

        if (!j)
                return NULL;
        for (size_t i = 0; j->procs && hashmap_iterate(j->procs, &i, &v);)
                proc_free(HASHMAP_TO_PTR(v));
        hashmap_free(j->procs);
        free(j->root);
        free(j);
        return NULL;
}

void jitmaps_forget(jitmaps *j, uint32_t pid) {
        int64_t v;

        if (j && hashmap_remove_u64(j->procs, pid, &v) >= 0)
                proc_free(HASHMAP_TO_PTR(v));
}

static const char *parse_hex(const char *p, const char *e, uint64_t *ret) {
        uint64_t v = 0;
        const char *s = p;

        if (p + 2 <= e && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
                s = p += 2;
        for (; p < e; p++) {
                unsigned d;

                if (*p >= '0' && *p <= '9')
                        d = (unsigned) (*p - '0');
                else if (*p >= 'a' && *p <= 'f')
                        d = (unsigned) (*p - 'a' + 10);
                else if (*p >= 'A' && *p <= 'F')
                        d = (unsigned) (*p - 'A' + 10);
                else
                        break;
                if (p - s >= 16)
                        return NULL;
                v = v << 4 | d;
        }
        if (p == s)
                return NULL;
        *ret = v;
        return p;
}

int jitmaps_parse_line(const char *line, size_t len, uint64_t *ret_start, uint64_t *ret_size,
                       const char **ret_name, size_t *ret_name_len) {
        const char *p = line, *e = line + len;
        uint64_t start, size;

        p = parse_hex(p, e, &start);
        if (!p || p >= e || *p != ' ')
                return -EINVAL;
        p = parse_hex(p + 1, e, &size);
        if (!p || p >= e || *p != ' ' || size == 0 || start + size < start)
                return -EINVAL;
        p++;
        if (p >= e || memchr(p, 0, (size_t) (e - p)))
                return -EINVAL;
        *ret_start = start;
        *ret_size = size;
        *ret_name = p;
        *ret_name_len = MIN((size_t) (e - p), (size_t) JITMAPS_MAX_NAME);
        return 0;
}

static int entry_cmp(const void *x, const void *y) {
        const jit_entry *a = x, *b = y;

        if (a->start != b->start)
                return a->start < b->start ? -1 : 1;
        return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Opens the map as the process sees it, else in ROOT/tmp; only a regular
 * file (not a link) of the process's owner. */
static int open_map(jitmaps *j, uint32_t pid) {
        const char *root = streq(j->root, "/") ? "" : j->root;
        char path[PATH_MAX];
        struct stat pst, st;

        snprintf(path, sizeof path, "%s/proc/%" PRIu32, root, pid);
        if (stat(path, &pst) < 0)
                return negative_errno();
        for (int k = 0; k < 2; k++) {
                int fd;

                if (k == 0)
                        snprintf(path, sizeof path, "%s/proc/%" PRIu32 "/root/tmp/perf-%" PRIu32 ".map", root, pid, pid);
                else
                        snprintf(path, sizeof path, "%s/tmp/perf-%" PRIu32 ".map", root, pid);
                fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
                if (fd < 0) {
                        if (errno == ELOOP)
                                j->stats.refused++;
                        continue;
                }
                if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != pst.st_uid) {
                        j->stats.refused++;
                        close(fd);
                        continue;
                }
                return fd;
        }
        return -ENOENT;
}

/* Reads what was appended to pid's map since p->pos. */
static void proc_read(jitmaps *j, jit_proc *p) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t want, have = 0, added = 0;
        ssize_t l;

        fd = open_map(j, p->pid);
        p->absent = fd < 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        if ((uint64_t) st.st_size < p->pos) {
                /* Truncated or written anew: start over. */
                p->n = p->names_size = 0;
                p->pos = 0;
        }
        if ((uint64_t) st.st_size == p->pos)
                return;
        want = (size_t) MIN((uint64_t) st.st_size - p->pos, (uint64_t) READ_MAX_BYTES);
        buf = malloc(want);
        if (!buf)
                return;
        while (have < want) {
                l = pread(fd, buf + have, want - have, (off_t) (p->pos + have));
                if (l <= 0)
                        break;
                have += (size_t) l;
        }
        j->stats.reads++;

        for (size_t off = 0; off < have;) {
                const char *line = buf + off, *nl = memchr(line, '\n', have - off), *name;
                uint64_t start, size;
                size_t len, name_len;

                if (!nl)
                        break;          /* a line being written: next time */
                len = (size_t) (nl - line);
                off += len + 1;
                p->pos += len + 1;
                if (jitmaps_parse_line(line, len, &start, &size, &name, &name_len) < 0) {
                        j->stats.bad_lines++;
                        continue;
                }
                if (p->n >= JITMAPS_MAX_ENTRIES || p->names_size + name_len + 1 > UINT32_MAX)
                        continue;
                if (GREEDY_REALLOC(p->v, p->alloc, p->n + 1) < 0 ||
                    GREEDY_REALLOC(p->names, p->names_alloc, p->names_size + name_len + 1) < 0)
                        break;
                memcpy(p->names + p->names_size, name, name_len);
                p->names[p->names_size + name_len] = 0;
                p->v[p->n] = (jit_entry) { start, size, (uint32_t) p->n, (uint32_t) p->names_size };
                p->names_size += name_len + 1;
                p->n++;
                added++;
        }
        if (added > 0) {
                /* seq (the line's ordinal in the file) keeps the file's
                 * order through the sort. */
                qsort(p->v, p->n, sizeof *p->v, entry_cmp);
                j->stats.entries += added;
        }
}

static const jit_entry *proc_find(const jit_proc *p, uint64_t addr) {
        size_t lo = 0, hi = p->n;
        const jit_entry *best = NULL;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (p->v[mid].start <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* Entries starting at or before addr, nearest first: the latest
         * (highest seq) that covers addr. */
        for (size_t k = 0; k < OVERLAP_SCAN && k < lo; k++) {
                const jit_entry *e = p->v + lo - 1 - k;

                if (addr - e->start < e->size && (!best || e->seq > best->seq))
                        best = e;
        }
        return best;
}

static void evict_one(jitmaps *j) {
        jit_proc *oldest = NULL;
        int64_t v;

        for (size_t i = 0; hashmap_iterate(j->procs, &i, &v);) {
                jit_proc *p = HASHMAP_TO_PTR(v);

                if (!oldest || p->used < oldest->used)
                        oldest = p;
        }
        if (oldest) {
                (void) hashmap_remove_u64(j->procs, oldest->pid, NULL);
                proc_free(oldest);
        }
}

const char *jitmaps_lookup(jitmaps *j, uint32_t pid, uint64_t addr, uint64_t now_ns, uint64_t *ret_start) {
        const jit_entry *e;
        jit_proc *p;
        int64_t v;

        if (!j)
                return NULL;
        if (hashmap_get_u64(j->procs, pid, &v) >= 0)
                p = HASHMAP_TO_PTR(v);
        else {
                if (hashmap_size(j->procs) >= JITMAPS_MAX_PROCESSES)
                        evict_one(j);
                p = calloc(1, sizeof *p);
                if (!p)
                        return NULL;
                p->pid = pid;
                if (hashmap_put_u64(j->procs, pid, HASHMAP_PTR(p)) < 0) {
                        proc_free(p);
                        return NULL;
                }
                proc_read(j, p);
                p->checked_ns = now_ns;
        }
        p->used = ++j->clock;

        e = proc_find(p, addr);
        if (!e && now_ns - p->checked_ns >= JITMAPS_RECHECK_NS) {
                p->checked_ns = now_ns;
                proc_read(j, p);
                e = proc_find(p, addr);
        }
        if (!e) {
                j->stats.misses++;
                return NULL;
        }
        j->stats.hits++;
        *ret_start = e->start;
        return p->names + e->name;
}

const jitmaps_stats *jitmaps_get_stats(const jitmaps *j) {
        return &j->stats;
}

size_t jitmaps_memory_bytes(const jitmaps *j) {
        size_t n = hashmap_memory_bytes(j->procs);
        int64_t v;

        for (size_t i = 0; hashmap_iterate(j->procs, &i, &v);) {
                const jit_proc *p = HASHMAP_TO_PTR(v);

                n += sizeof *p + p->alloc * sizeof(jit_entry) + p->names_alloc;
        }
        return n;
}
