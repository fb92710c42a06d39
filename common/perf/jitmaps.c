/* SPDX-License-Identifier: GPL-2.0-or-later */
/* JIT symbol maps (jitmaps.h): read incrementally per process, looked up
 * by address. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "hashmap.h"
#include "macro.h"
#include "perf/jitmaps.h"

#define READ_MAX_BYTES (1024u * 1024u)          /* per re-read */
#define READ_BUDGET_BYTES (4u * 1024u * 1024u)  /* per second, all processes */
#define OVERLAP_SCAN 16                         /* earlier entries looked at for a later overlapping one */

typedef struct jit_entry {
        uint64_t start, size;
        uint32_t seq;           /* line number: later wins */
        uint32_t name;          /* offset in names */
} jit_entry;

typedef struct jit_proc {
        uint32_t pid;
        bool absent;            /* no readable map at the last look */
        bool skipping;          /* inside a line longer than a read: up to its end */
        uint32_t seq;           /* lines taken so far */
        uint64_t pos;           /* bytes of the file taken */
        uint64_t checked_ns;
        uint64_t used;          /* j->clock at the last lookup */
        uint64_t version;       /* see jitmaps_version() */
        jit_entry *v;           /* sorted by start, then seq */
        size_t n, alloc;
        char *names;
        size_t names_size, names_alloc;
} jit_proc;

struct jitmaps {
        char *root;
        hashmap *procs;         /* pid -> jit_proc * */
        uint64_t clock;
        uint64_t versions;      /* the last jit_proc.version handed out */
        uint64_t names_bytes;   /* all processes' */
        uint64_t budget_start_ns, budget_bytes;
        jitmaps_stats stats;
};

static void proc_free(jitmaps *j, jit_proc *p) {
        if (!p)
                return;
        j->names_bytes -= p->names_size;
        free(p->v);
        free(p->names);
        free(p);
}

size_t jitmaps_memory_bytes(const jitmaps *j) {
        size_t state = 0, bytes;
        int64_t v;

        if (!j)
                return 0;
        bytes = sizeof *j + hashmap_memory_bytes(j->procs);
        while (hashmap_iterate(j->procs, &state, &v)) {
                const jit_proc *p = HASHMAP_TO_PTR(v);

                bytes += sizeof *p + p->alloc * sizeof(jit_entry) + p->names_alloc;
        }
        return bytes;
}

void jitmaps_stop_lookups(jitmaps *j) {
        if (j) {
                free(j->root);
                j->root = NULL;
        }
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
                proc_free(j, HASHMAP_TO_PTR(v));
        hashmap_free(j->procs);
        free(j->root);
        free(j);
        return NULL;
}

void jitmaps_forget(jitmaps *j, uint32_t pid) {
        int64_t v;

        if (j && hashmap_remove_u64(j->procs, pid, &v) >= 0)
                proc_free(j, HASHMAP_TO_PTR(v));
}

static const char *parse_hex(const char *p, const char *e, uint64_t *ret) {
        uint64_t v = 0;
        const char *s = p;

        if (p + 2 <= e && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
                s = p += 2;
        for (; p < e; p++) {
                int d = unhexchar(*p);

                if (d < 0)
                        break;
                if (p - s >= 16)
                        return NULL;
                v = v << 4 | (uint64_t) d;
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

/* The real uid and the innermost pid namespace's pid of a process, from
 * ROOT/proc/PID/status ("Uid:" and "NSpid:"). */
static int read_status(const char *root, uint32_t pid, uint32_t *ret_uid, uint32_t *ret_nspid) {
        _cleanup_free_ char *text = NULL;
        char rel[64];
        const char *p;
        bool uid = false;
        int r;

        snprintf(rel, sizeof rel, "proc/%" PRIu32 "/status", pid);
        r = read_full_file_at(root, rel, 64 * 1024, &text, NULL);
        if (r < 0)
                return r;
        *ret_nspid = pid;
        for (p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (strncmp(p, "Uid:", 4) == 0)
                        uid = sscanf(p + 4, "%" SCNu32, ret_uid) == 1;
                else if (strncmp(p, "NSpid:", 6) == 0) {
                        /* The last number: the pid in the process's own namespace. */
                        const char *e = strchr(p, '\n') ?: p + strlen(p), *q = e;

                        while (q > p + 6 && (q[-1] < '0' || q[-1] > '9'))
                                q--;
                        while (q > p + 6 && q[-1] >= '0' && q[-1] <= '9')
                                q--;
                        if (sscanf(q, "%" SCNu32, ret_nspid) != 1)
                                *ret_nspid = pid;
                }
        }
        return uid ? 0 : -EBADMSG;
}

/* Opens the map as the process sees it (its /tmp, its pid), else, for a
 * process in the daemon's pid namespace, ROOT/tmp/perf-PID.map: a regular
 * file (never a link, anywhere in the path; never a device or FIFO), with
 * one name, owned by the process's real uid. */
static int open_map(jitmaps *j, uint32_t pid) {
        char path[64];
        uint32_t uid, nspid;
        int r;

        if (!j->root)
                return -ENOENT;
        r = read_status(j->root, pid, &uid, &nspid);
        if (r < 0)
                return r;
        for (int k = 0; k < 2; k++) {
                _cleanup_close_ int rfd = -1;
                struct stat st;
                int fd;

                if (k == 1 && nspid != pid)
                        break;          /* ROOT/tmp has the host's pids' maps */
                rfd = open_root_dir(j->root, k == 0 ? pid : 0);
                if (rfd < 0)
                        continue;
                snprintf(path, sizeof path, "/tmp/perf-%" PRIu32 ".map", k == 0 ? nspid : pid);
                fd = open_regular_file(rfd, path, true, &st);
                if (fd == -ENOENT)
                        continue;
                if (fd < 0 || st.st_uid != uid || st.st_nlink != 1) {
                        j->stats.refused++;
                        if (fd >= 0)
                                close(fd);
                        continue;
                }
                return fd;
        }
        return -ENOENT;
}

/* Reads what was appended to pid's map since p->pos: at most
 * READ_MAX_BYTES and what is left of the second's READ_BUDGET_BYTES for
 * all processes, so the draining loop never reads much at once. New
 * entries are sorted and merged in, not the whole table sorted again. */
static void proc_read(jitmaps *j, jit_proc *p, uint64_t now_ns) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ jit_entry *merged = NULL;
        struct stat st;
        size_t want, have = 0, first_new = p->n, off = 0;
        ssize_t l;

        if (now_ns - j->budget_start_ns >= NSEC_PER_SEC) {
                j->budget_start_ns = now_ns;
                j->budget_bytes = READ_BUDGET_BYTES;
        }
        if (j->budget_bytes == 0)
                return;
        /* What the map says may change below. */
        p->version = ++j->versions;
        fd = open_map(j, p->pid);
        p->absent = fd < 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        if ((uint64_t) st.st_size < p->pos) {
                /* Truncated or written anew: start over. */
                j->names_bytes -= p->names_size;
                p->n = p->names_size = 0;
                p->pos = 0;
                p->skipping = false;
                first_new = 0;
        }
        if ((uint64_t) st.st_size == p->pos)
                return;
        want = (size_t) MIN((uint64_t) st.st_size - p->pos, (uint64_t) MIN(READ_MAX_BYTES, j->budget_bytes));
        buf = malloc(want);
        if (!buf)
                return;
        while (have < want) {
                l = pread(fd, buf + have, want - have, (off_t) (p->pos + have));
                if (l <= 0)
                        break;
                have += (size_t) l;
        }
        j->budget_bytes -= MIN(j->budget_bytes, have);
        j->stats.reads++;

        while (off < have) {
                const char *line = buf + off, *nl = memchr(line, '\n', have - off), *name;
                uint64_t start, size;
                size_t len, name_len;

                if (!nl) {
                        /* A line being written (next time), or one longer
                         * than a whole read: skipped to its end. */
                        if (off == 0 && have == READ_MAX_BYTES) {
                                p->pos += have;
                                p->skipping = true;
                                j->stats.bad_lines++;
                        }
                        break;
                }
                len = (size_t) (nl - line);
                off += len + 1;
                p->pos += len + 1;
                if (p->skipping) {
                        p->skipping = false;
                        continue;
                }
                if (jitmaps_parse_line(line, len, &start, &size, &name, &name_len) < 0) {
                        j->stats.bad_lines++;
                        continue;
                }
                if (p->n >= JITMAPS_MAX_ENTRIES || j->names_bytes + name_len + 1 > JITMAPS_MAX_NAME_BYTES)
                        continue;
                if (GREEDY_REALLOC(p->v, p->alloc, p->n + 1) < 0 ||
                    GREEDY_REALLOC(p->names, p->names_alloc, p->names_size + name_len + 1) < 0)
                        break;
                memcpy(p->names + p->names_size, name, name_len);
                p->names[p->names_size + name_len] = 0;
                p->v[p->n] = (jit_entry) { start, size, p->seq++, (uint32_t) p->names_size };
                p->names_size += name_len + 1;
                j->names_bytes += name_len + 1;
                p->n++;
        }
        if (p->n == first_new)
                return;
        j->stats.entries += p->n - first_new;
        qsort(p->v + first_new, p->n - first_new, sizeof *p->v, entry_cmp);
        if (first_new == 0)
                return;
        merged = malloc(p->n * sizeof *merged);
        if (!merged) {
                qsort(p->v, p->n, sizeof *p->v, entry_cmp);
                return;
        }
        for (size_t a = 0, b = first_new, k = 0; k < p->n; k++)
                merged[k] = b >= p->n || (a < first_new && entry_cmp(p->v + a, p->v + b) <= 0) ? p->v[a++] : p->v[b++];
        memcpy(p->v, merged, p->n * sizeof *merged);
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
                proc_free(j, oldest);
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
                p->version = ++j->versions;
                if (hashmap_put_u64(j->procs, pid, HASHMAP_PTR(p)) < 0) {
                        proc_free(j, p);
                        return NULL;
                }
                proc_read(j, p, now_ns);
                p->checked_ns = now_ns;
        }
        p->used = ++j->clock;

        e = proc_find(p, addr);
        if (!e && now_ns - p->checked_ns >= JITMAPS_RECHECK_NS) {
                p->checked_ns = now_ns;
                proc_read(j, p, now_ns);
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

bool jitmaps_version(const jitmaps *j, uint32_t pid, uint64_t *ret) {
        int64_t v;

        if (!j || hashmap_get_u64(j->procs, pid, &v) < 0)
                return false;
        *ret = ((const jit_proc *) HASHMAP_TO_PTR(v))->version;
        return true;
}

const jitmaps_stats *jitmaps_get_stats(const jitmaps *j) {
        return &j->stats;
}

