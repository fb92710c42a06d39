/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The task table (tasks.h): processes with their mappings, threads with
 * their comm, and mapped files interned by (path, build-id), each in a
 * common/hashmap; eviction of exited entries and negative-cache
 * placeholders, oldest first, at the configured caps. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "fileio.h"
#include "hashmap.h"
#include "macro.h"
#include "perf/tasks.h"

/* TASK_COMM_LEN in include/linux/sched.h: 15 characters and a NUL. */
#define COMM_MAX 16

/* /proc/PID/maps of a process at vm.max_map_count (65530 by default) is a
 * few MiB; 16 MiB bounds what one read can cost. */
#define MAPS_FILE_MAX_BYTES (16u * 1024u * 1024u)
#define COMM_FILE_MAX_BYTES 4096u

/* Paths in MMAP2 records are at most PATH_MAX bytes (perf_event_mmap_event
 * uses a PATH_MAX buffer). */
#define PATH_MAX_BYTES 4096u

/* Intrusive circular list of evictable entries (exited, or negative-cache
 * placeholders), oldest first. */
typedef struct list_link {
        struct list_link *prev, *next;
} list_link;

static void list_init(list_link *head) {
        head->prev = head->next = head;
}

static bool link_linked(const list_link *l) {
        return l->next != NULL;
}

static void list_append(list_link *head, list_link *l) {
        l->prev = head->prev;
        l->next = head;
        head->prev->next = l;
        head->prev = l;
}

static void list_unlink(list_link *l) {
        if (!link_linked(l))
                return;
        l->prev->next = l->next;
        l->next->prev = l->prev;
        l->prev = l->next = NULL;
}

#define CONTAINER_OF(ptr, type, member) ((type *) (void *) ((char *) (ptr) - offsetof(type, member)))

/* A mapped file, interned by (path, build-id): the same libc is mapped by
 * nearly every process and FORK copies whole mapping lists. */
typedef struct file_ref {
        size_t refs;
        uint64_t id;
        size_t path_len;
        size_t key_len;         /* of path, its NUL and build_id: the key in tasks.files */
        char path[];            /* path, NUL, build_id (hex, "" if unknown), NUL */
} file_ref;

typedef struct map_entry {
        uint64_t start, end, pgoff;
        file_ref *file;
} map_entry;

typedef enum info_state {
        INFO_UNKNOWN,   /* not read from /proc yet; will be on first use */
        INFO_KNOWN,     /* complete: from /proc, or rebuilt from FORK/exec */
        INFO_FAILED,    /* the /proc read failed: not retried until a side-band record names it */
} info_state;

typedef struct process {
        uint32_t pid;
        info_state maps_state;
        bool exited;
        bool placeholder;       /* only a negative-cache entry, no side-band record seen */
        uint64_t exit_ns;
        map_entry *maps;        /* sorted by start, non-overlapping */
        size_t n_maps, alloc_maps;
        list_link evict;
} process;

typedef struct thread {
        uint32_t tid, pid;
        info_state comm_state;
        bool exited;
        bool placeholder;
        uint64_t exit_ns;
        char comm[COMM_MAX];
        list_link evict;
} thread;

struct tasks {
        char *root;
        hashmap *processes;     /* pid -> process */
        hashmap *threads;       /* tid -> thread */
        hashmap *files;         /* path NUL build_id -> file_ref */
        char *keybuf;           /* a files key being looked up */
        size_t keybuf_size;
        list_link evict_processes, evict_threads;
        size_t n_process_placeholders, n_thread_placeholders;
        size_t n_maps_total;
        size_t max_processes, max_threads, max_maps_per_process, max_maps_total;
        uint64_t next_file_id;
        /* Build-ids of files known from /proc/PID/maps (MMAP2 records
         * carry their own), by "inode NUL path": an index in bids, whose
         * entry is "" for a file without one or that could not be read. */
        hashmap *proc_build_ids;
        char (*bids)[BUILD_ID_HEX_MAX];
        size_t n_bids, alloc_bids;
};

/* Forgotten (and read again as needed) past this many files. */
#define PROC_BUILD_IDS_MAX 16384

static const char *file_build_id(const file_ref *f) {
        return f->path + f->path_len + 1;
}

/* The files key of (path, build_id) in t->keybuf. */
static int file_key(tasks *t, const char *path, const char *build_id, size_t *ret_len) {
        size_t lp = strlen(path), lb = strlen(build_id);
        int r;

        r = GREEDY_REALLOC(t->keybuf, t->keybuf_size, lp + lb + 2);
        if (r < 0)
                return r;
        memcpy(t->keybuf, path, lp + 1);
        memcpy(t->keybuf + lp + 1, build_id, lb + 1);
        *ret_len = lp + 1 + lb;
        return 0;
}

static int file_intern(tasks *t, const char *path, const char *build_id, file_ref **ret) {
        file_ref *f;
        size_t len;
        int64_t v;
        int r;

        r = file_key(t, path, build_id, &len);
        if (r < 0)
                return r;
        if (hashmap_get(t->files, t->keybuf, len, &v) >= 0) {
                f = HASHMAP_TO_PTR(v);
                f->refs++;
                *ret = f;
                return 0;
        }

        f = malloc(sizeof(*f) + len + 1);
        if (!f)
                return -ENOMEM;
        f->refs = 1;
        f->id = ++t->next_file_id;
        f->path_len = strlen(path);
        f->key_len = len;
        memcpy(f->path, t->keybuf, len + 1);
        r = hashmap_put(t->files, f->path, len, HASHMAP_PTR(f));
        if (r < 0) {
                free(f);
                return r;
        }
        *ret = f;
        return 0;
}

static void file_unref(tasks *t, file_ref *f) {
        if (!f || --f->refs > 0)
                return;
        (void) hashmap_remove(t->files, f->path, f->key_len, NULL);
        free(f);
}

static void maps_clear(tasks *t, process *p) {
        for (size_t i = 0; i < p->n_maps; i++)
                file_unref(t, p->maps[i].file);
        t->n_maps_total -= p->n_maps;
        p->n_maps = 0;
}

static int maps_reserve(process *p, size_t n) {
        return GREEDY_REALLOC(p->maps, p->alloc_maps, n);
}

/* Inserts [start, end) taking over one reference to file. Like mmap() with
 * MAP_FIXED, it replaces whatever it overlaps: mappings it covers are
 * dropped, one it partly covers is trimmed, one that contains it is split
 * in two (the right part's file offset moves along with its start, as
 * __split_vma() adjusts vm_pgoff). On failure the reference is dropped. */
static int maps_insert(tasks *t, process *p, uint64_t start, uint64_t end, uint64_t pgoff, file_ref *file) {
        map_entry left = {}, right = {};
        bool has_left, has_right;
        size_t lo = 0, hi = p->n_maps, i, j, k, n_new;
        int r;

        /* i: first mapping ending after start; [i, j): the ones overlapping. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (p->maps[mid].end <= start)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        i = lo;
        for (j = i; j < p->n_maps && p->maps[j].start < end; j++)
                ;

        has_left = i < j && p->maps[i].start < start;
        has_right = i < j && p->maps[j - 1].end > end;
        k = 1 + has_left + has_right;
        n_new = p->n_maps - (j - i) + k;

        if (n_new > p->n_maps &&
            (n_new > t->max_maps_per_process || t->n_maps_total + (n_new - p->n_maps) > t->max_maps_total)) {
                file_unref(t, file);
                return -ENOSPC;
        }
        r = maps_reserve(p, n_new);
        if (r < 0) {
                file_unref(t, file);
                return r;
        }

        if (has_left) {
                left = p->maps[i];
                left.end = start;
                left.file->refs++;
        }
        if (has_right) {
                right = p->maps[j - 1];
                right.pgoff += end - right.start;
                right.start = end;
                right.file->refs++;
        }
        for (size_t x = i; x < j; x++)
                file_unref(t, p->maps[x].file);

        memmove(p->maps + i + k, p->maps + j, (p->n_maps - j) * sizeof(*p->maps));
        if (has_left)
                p->maps[i++] = left;
        p->maps[i++] = (map_entry) { .start = start, .end = end, .pgoff = pgoff, .file = file };
        if (has_right)
                p->maps[i] = right;

        t->n_maps_total = t->n_maps_total - p->n_maps + n_new;
        p->n_maps = n_new;
        return 0;
}

static const map_entry *maps_find(const process *p, uint64_t addr) {
        size_t lo = 0, hi = p->n_maps;

        /* First mapping that ends after addr; it covers addr if it starts at or before it. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (p->maps[mid].end <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < p->n_maps && p->maps[lo].start <= addr)
                return &p->maps[lo];
        return NULL;
}

static void evict_update_process(tasks *t, process *p) {
        bool want = p->exited || p->placeholder;

        if (want && !link_linked(&p->evict))
                list_append(&t->evict_processes, &p->evict);
        else if (!want)
                list_unlink(&p->evict);
}

static void evict_update_thread(tasks *t, thread *th) {
        bool want = th->exited || th->placeholder;

        if (want && !link_linked(&th->evict))
                list_append(&t->evict_threads, &th->evict);
        else if (!want)
                list_unlink(&th->evict);
}

static void process_free(tasks *t, process *p) {
        if (!p)
                return;
        (void) hashmap_remove_u64(t->processes, p->pid, NULL);
        list_unlink(&p->evict);
        if (p->placeholder)
                t->n_process_placeholders--;
        maps_clear(t, p);
        free(p->maps);
        free(p);
}

static void thread_free(tasks *t, thread *th) {
        if (!th)
                return;
        (void) hashmap_remove_u64(t->threads, th->tid, NULL);
        list_unlink(&th->evict);
        if (th->placeholder)
                t->n_thread_placeholders--;
        free(th);
}

static process *process_get(const tasks *t, uint32_t pid) {
        int64_t v;
        return hashmap_get_u64(t->processes, pid, &v) >= 0 ? HASHMAP_TO_PTR(v) : NULL;
}

static thread *thread_get(const tasks *t, uint32_t tid) {
        int64_t v;
        return hashmap_get_u64(t->threads, tid, &v) >= 0 ? HASHMAP_TO_PTR(v) : NULL;
}

/* Creates an entry, making room by dropping the oldest evictable one
 * (exited longest ago, or a negative-cache placeholder) at the cap. */
static int process_new(tasks *t, uint32_t pid, bool placeholder, process **ret) {
        process *p;
        int r;

        if (hashmap_size(t->processes) >= t->max_processes) {
                if (t->evict_processes.next == &t->evict_processes)
                        return -ENOSPC;
                process_free(t, CONTAINER_OF(t->evict_processes.next, process, evict));
        }

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->placeholder = placeholder;
        r = hashmap_put_u64(t->processes, pid, HASHMAP_PTR(p));
        if (r < 0) {
                free(p);
                return r;
        }
        if (placeholder)
                t->n_process_placeholders++;
        evict_update_process(t, p);
        *ret = p;
        return 0;
}

static int thread_new(tasks *t, uint32_t pid, uint32_t tid, bool placeholder, thread **ret) {
        thread *th;
        int r;

        if (hashmap_size(t->threads) >= t->max_threads) {
                if (t->evict_threads.next == &t->evict_threads)
                        return -ENOSPC;
                thread_free(t, CONTAINER_OF(t->evict_threads.next, thread, evict));
        }

        th = calloc(1, sizeof(*th));
        if (!th)
                return -ENOMEM;
        th->tid = tid;
        th->pid = pid;
        th->placeholder = placeholder;
        r = hashmap_put_u64(t->threads, tid, HASHMAP_PTR(th));
        if (r < 0) {
                free(th);
                return r;
        }
        if (placeholder)
                t->n_thread_placeholders++;
        evict_update_thread(t, th);
        *ret = th;
        return 0;
}

/* A side-band record names pid: the entry becomes real (no longer a mere
 * negative-cache placeholder), and a failed /proc read may be retried. */
static int process_touch(tasks *t, uint32_t pid, process **ret) {
        process *p = process_get(t, pid);
        int r;

        if (!p) {
                r = process_new(t, pid, false, &p);
                if (r < 0)
                        return r;
        } else if (p->placeholder) {
                p->placeholder = false;
                t->n_process_placeholders--;
                evict_update_process(t, p);
        }
        if (p->maps_state == INFO_FAILED)
                p->maps_state = INFO_UNKNOWN;
        *ret = p;
        return 0;
}

static int thread_touch(tasks *t, uint32_t pid, uint32_t tid, thread **ret) {
        thread *th = thread_get(t, tid);
        int r;

        if (!th) {
                r = thread_new(t, pid, tid, false, &th);
                if (r < 0)
                        return r;
        } else if (th->placeholder) {
                th->placeholder = false;
                t->n_thread_placeholders--;
                evict_update_thread(t, th);
        }
        if (th->comm_state == INFO_FAILED)
                th->comm_state = INFO_UNKNOWN;
        th->pid = pid;
        *ret = th;
        return 0;
}

/* The build-id of the file a /proc/PID/maps line maps (its path, absolute,
 * and the line for its inode), "" if unknown. The file is opened as the
 * process sees it (ROOT/proc/PID/root/PATH), else as we do (ROOT/PATH),
 * and only believed if its inode is the mapping's: a file replaced since
 * is another file. A few syscalls per distinct file, then a lookup. */
static const char *proc_file_build_id(tasks *t, uint32_t pid, const char *line, const char *path) {
        char key[PATH_MAX_BYTES + 48];
        char hex[BUILD_ID_HEX_MAX] = "";
        unsigned maj, min;
        uint64_t ino;
        int64_t idx;
        size_t len;

        if (path[0] != '/' || sscanf(line, "%*s %*s %*s %x:%x %" SCNu64, &maj, &min, &ino) != 3 || ino == 0)
                return "";
        /* The device in the key too: another file system's inode numbers
         * (a container's tmpfs) are other files. */
        len = (size_t) snprintf(key, sizeof key, "%x:%x:%" PRIu64 "%c%s", maj, min, ino, 0, path);
        if (len >= sizeof key)
                return "";
        if (hashmap_get(t->proc_build_ids, key, len, &idx) >= 0)
                return t->bids[idx];

        for (int k = 0; k < 2 && !hex[0]; k++) {
                _cleanup_close_ int rfd = -1, fd = -1;
                struct stat st;

                rfd = open_root_dir(t->root, k == 0 ? pid : 0);
                if (rfd < 0)
                        continue;
                fd = open_regular_file(rfd, path, false, &st);
                if (fd < 0 || (uint64_t) st.st_ino != ino)
                        continue;
                if (elfsyms_build_id(fd, hex) < 0)
                        hex[0] = 0;
                break;          /* the right file: with or without a build-id */
        }

        if (t->n_bids >= PROC_BUILD_IDS_MAX) {
                hashmap_clear(t->proc_build_ids);
                t->n_bids = 0;
        }
        if (GREEDY_REALLOC(t->bids, t->alloc_bids, t->n_bids + 1) < 0 ||
            hashmap_put(t->proc_build_ids, key, len, (int64_t) t->n_bids) < 0)
                return "";
        memcpy(t->bids[t->n_bids], hex, sizeof hex);
        return t->bids[t->n_bids++];
}

/* Reads ROOT/proc/PID/maps. It shows the process as it is now, which
 * replaces whatever partial picture side-band records gave of a process
 * that existed before we started; only executable mappings are kept, like
 * the MMAP2 records perf emits without mmap_data. */
static int process_load_maps(tasks *t, process *p) {
        _cleanup_free_ char *buf = NULL;
        char rel[64];
        size_t size = 0;
        int r;

        snprintf(rel, sizeof(rel), "proc/%" PRIu32 "/maps", p->pid);
        r = read_full_file_at(t->root, rel, MAPS_FILE_MAX_BYTES, &buf, &size);
        if (r < 0) {
                p->maps_state = INFO_FAILED;
                return r;
        }

        maps_clear(t, p);
        for (char *line = buf, *e = buf + size; line < e;) {
                char *nl = memchr(line, '\n', (size_t) (e - line));
                uint64_t start, end, pgoff;
                const char *path, *line_start;
                file_ref *f;
                bool exec;

                if (nl)
                        *nl = 0;
                line_start = line;
                r = proc_maps_parse_line(line, &start, &end, &pgoff, &exec, &path);
                line = nl ? nl + 1 : e;
                /* Executable anonymous memory is JIT code: keep it under
                 * the name perf's MMAP2 records give it. */
                if (r == -ENOENT && exec)
                        path = "//anon";
                else if (r < 0)
                        continue;
                if (!exec || strlen(path) > PATH_MAX_BYTES)
                        continue;

                r = file_intern(t, path, proc_file_build_id(t, p->pid, line_start, path), &f);
                if (r < 0)
                        goto fail;
                r = maps_insert(t, p, start, end, pgoff, f);
                if (r < 0)
                        goto fail;
        }
        p->maps_state = INFO_KNOWN;
        return 0;

fail:
        /* Out of memory or over a cap: keep what was read, so lookups still
         * work for the mappings we have, but do not claim completeness. */
        p->maps_state = INFO_FAILED;
        return r;
}

static int thread_load_comm(tasks *t, thread *th) {
        _cleanup_free_ char *buf = NULL;
        char rel[64];
        size_t size = 0, l;
        int r;

        snprintf(rel, sizeof(rel), "proc/%" PRIu32 "/task/%" PRIu32 "/comm", th->pid, th->tid);
        r = read_full_file_at(t->root, rel, COMM_FILE_MAX_BYTES, &buf, &size);
        if (r < 0) {
                th->comm_state = INFO_FAILED;
                return r;
        }
        /* proc_task_comm reads back "%s\n" of the (at most 15 byte) comm. */
        l = strnlen(buf, size);
        if (l > 0 && buf[l - 1] == '\n')
                l--;
        l = MIN(l, (size_t) COMM_MAX - 1);
        memcpy(th->comm, buf, l);
        th->comm[l] = 0;
        th->comm_state = INFO_KNOWN;
        return 0;
}

/* The process for a lookup: loads /proc/PID/maps on first use; remembers
 * failures as a placeholder so a dead pid's samples do not each cost an
 * open(). NULL if it cannot be known. */
static process *process_lookup(tasks *t, uint32_t pid) {
        process *p = process_get(t, pid);

        if (!p) {
                if (!t->root || process_new(t, pid, true, &p) < 0)
                        return NULL;
        }
        if (p->maps_state == INFO_UNKNOWN && t->root) {
                (void) process_load_maps(t, p);
                if (p->placeholder && p->maps_state == INFO_KNOWN) {
                        /* It exists: no longer a negative-cache entry. */
                        p->placeholder = false;
                        t->n_process_placeholders--;
                        evict_update_process(t, p);
                }
        }
        return p;
}

static thread *thread_lookup(tasks *t, uint32_t pid, uint32_t tid) {
        thread *th = thread_get(t, tid);

        if (!th) {
                if (!t->root || thread_new(t, pid, tid, true, &th) < 0)
                        return NULL;
        }
        if (th->comm_state == INFO_UNKNOWN && t->root) {
                (void) thread_load_comm(t, th);
                if (th->placeholder && th->comm_state == INFO_KNOWN) {
                        th->placeholder = false;
                        t->n_thread_placeholders--;
                        evict_update_thread(t, th);
                }
        }
        return th;
}

void tasks_stop_lookups(tasks *t) {
        if (t) {
                free(t->root);
                t->root = NULL;
        }
}

int tasks_new(const char *root, tasks **ret) {
        tasks *t;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        if (root) {
                t->root = strdup(root);
                if (!t->root) {
                        free(t);
                        return -ENOMEM;
                }
        }
        if (hashmap_new(&t->processes) < 0 || hashmap_new(&t->threads) < 0 || hashmap_new(&t->files) < 0 ||
            hashmap_new(&t->proc_build_ids) < 0) {
                tasks_free(t);
                return -ENOMEM;
        }
        list_init(&t->evict_processes);
        list_init(&t->evict_threads);
        t->max_processes = TASKS_MAX_PROCESSES_DEFAULT;
        t->max_threads = TASKS_MAX_THREADS_DEFAULT;
        t->max_maps_per_process = TASKS_MAX_MAPPINGS_PER_PROCESS_DEFAULT;
        t->max_maps_total = TASKS_MAX_MAPPINGS_TOTAL_DEFAULT;
        *ret = t;
        return 0;
}

void tasks_set_limits(tasks *t, size_t max_processes, size_t max_threads,
                      size_t max_mappings_per_process, size_t max_mappings_total) {
        if (!t)
                return;
        if (max_processes > 0)
                t->max_processes = max_processes;
        if (max_threads > 0)
                t->max_threads = max_threads;
        if (max_mappings_per_process > 0)
                t->max_maps_per_process = max_mappings_per_process;
        if (max_mappings_total > 0)
                t->max_maps_total = max_mappings_total;
}

tasks *tasks_free(tasks *t) {
        int64_t v;

        if (!t)
                return NULL;
        for (size_t i = 0; hashmap_iterate(t->processes, &i, &v);) {
                process *p = HASHMAP_TO_PTR(v);

                maps_clear(t, p);       /* changes t->files, not t->processes */
                free(p->maps);
                free(p);
        }
        for (size_t i = 0; hashmap_iterate(t->threads, &i, &v);)
                free(HASHMAP_TO_PTR(v));
        /* Every file reference belonged to a mapping, freed above. */
        hashmap_free(t->processes);
        hashmap_free(t->threads);
        hashmap_free(t->files);
        hashmap_free(t->proc_build_ids);
        free(t->bids);
        free(t->keybuf);
        free(t->root);
        free(t);
        return NULL;
}

int tasks_comm(tasks *t, uint32_t pid, uint32_t tid, const char *comm, bool exec) {
        thread *th;
        size_t l;
        int r;

        if (!t || !comm)
                return -EINVAL;

        if (exec) {
                process *p;

                /* PERF_RECORD_COMM with PERF_RECORD_MISC_COMM_EXEC is emitted
                 * from begin_new_exec(), before load_elf_binary() maps the new
                 * image: the old mappings are gone and the MMAP2 records of the
                 * new ones follow. */
                r = process_touch(t, pid, &p);
                if (r < 0)
                        return r;
                maps_clear(t, p);
                p->maps_state = INFO_KNOWN;
                p->exited = false;
                evict_update_process(t, p);
        }

        r = thread_touch(t, pid, tid, &th);
        if (r < 0)
                return r;
        l = strnlen(comm, COMM_MAX - 1);
        memcpy(th->comm, comm, l);
        th->comm[l] = 0;
        th->comm_state = INFO_KNOWN;
        th->exited = false;
        evict_update_thread(t, th);
        return 0;
}

int tasks_fork(tasks *t, uint32_t ppid, uint32_t ptid, uint32_t pid, uint32_t tid) {
        thread *parent_thread, *th;
        int r;

        if (!t)
                return -EINVAL;

        /* A new process: a copy of the parent's address space (copy_mm()).
         * A pid still in the table belongs to an exited process whose
         * number was reused: replace it. */
        if (pid != ppid) {
                process *parent = process_lookup(t, ppid), *p;
                size_t n = parent ? parent->n_maps : 0;

                process_free(t, process_get(t, pid));
                if (parent && (n > t->max_maps_per_process || t->n_maps_total + n > t->max_maps_total))
                        return -ENOSPC;

                r = process_new(t, pid, false, &p);
                if (r < 0)
                        return r;
                /* The parent may have been evicted to make room. */
                parent = process_get(t, ppid);
                if (parent) {
                        r = maps_reserve(p, parent->n_maps);
                        if (r < 0) {
                                process_free(t, p);
                                return r;
                        }
                        if (parent->n_maps > 0)         /* maps may be NULL then */
                                memcpy(p->maps, parent->maps, parent->n_maps * sizeof(*p->maps));
                        for (size_t i = 0; i < parent->n_maps; i++)
                                p->maps[i].file->refs++;
                        p->n_maps = parent->n_maps;
                        t->n_maps_total += p->n_maps;
                }
                /* If we do not know all the parent had mapped, the child's
                 * own maps are read on first use (replacing the partial copy). */
                p->maps_state = parent && parent->maps_state == INFO_KNOWN ? INFO_KNOWN : INFO_UNKNOWN;
        }

        /* The new thread starts with its parent thread's comm (dup_task_struct()). */
        parent_thread = thread_lookup(t, ppid, ptid);
        thread_free(t, thread_get(t, tid));
        r = thread_new(t, pid, tid, false, &th);
        if (r < 0)
                return r;
        parent_thread = thread_get(t, ptid);
        if (parent_thread && parent_thread->comm_state == INFO_KNOWN) {
                memcpy(th->comm, parent_thread->comm, sizeof(th->comm));
                th->comm_state = INFO_KNOWN;
        }
        return 0;
}

int tasks_exit(tasks *t, uint32_t pid, uint32_t tid, uint64_t time_ns) {
        thread *th;

        if (!t)
                return -EINVAL;

        /* Unknown tasks are not created just to be marked dead. */
        th = thread_get(t, tid);
        if (th) {
                th->exited = true;
                th->exit_ns = time_ns;
                evict_update_thread(t, th);
        }
        if (tid == pid) {
                process *p = process_get(t, pid);
                if (p) {
                        p->exited = true;
                        p->exit_ns = time_ns;
                        evict_update_process(t, p);
                }
        }
        return 0;
}

static bool build_id_valid(const char *s) {
        size_t l = 0;

        for (; s[l]; l++)
                if (l >= BUILD_ID_HEX_MAX - 1 ||
                    !((s[l] >= '0' && s[l] <= '9') || (s[l] >= 'a' && s[l] <= 'f')))
                        return false;
        return true;
}

int tasks_mmap(tasks *t, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
               const char *path, const char *build_id_hex) {
        file_ref *f;
        process *p;
        int r;

        if (!t)
                return -EINVAL;
        if (len == 0 || start > UINT64_MAX - len)
                return -EINVAL;
        /* perf names anonymous executable memory (JIT code) "//anon". */
        if (!path || !*path)
                path = "//anon";
        if (strnlen(path, PATH_MAX_BYTES + 1) > PATH_MAX_BYTES)
                return -ENAMETOOLONG;
        if (!build_id_hex)
                build_id_hex = "";
        if (!build_id_valid(build_id_hex))
                return -EINVAL;

        r = process_touch(t, pid, &p);
        if (r < 0)
                return r;
        /* A process we have not seen fork existed before we started: what it
         * mapped earlier is only in /proc. */
        if (p->maps_state == INFO_UNKNOWN && t->root)
                (void) process_load_maps(t, p);

        r = file_intern(t, path, build_id_hex, &f);
        if (r < 0)
                return r;
        return maps_insert(t, p, start, start + len, pgoff, f);
}

const char *tasks_get_comm(tasks *t, uint32_t pid, uint32_t tid) {
        thread *th;

        if (!t)
                return NULL;
        th = thread_lookup(t, pid, tid);
        if (!th || th->comm_state != INFO_KNOWN)
                return NULL;
        return th->comm;
}

int tasks_find_mapping(tasks *t, uint32_t pid, uint64_t addr, mapping *ret) {
        const map_entry *m;
        process *p;

        if (!t)
                return -EINVAL;
        p = process_lookup(t, pid);
        if (!p)
                return -ENOENT;
        m = maps_find(p, addr);
        if (!m)
                return -ENOENT;
        if (ret) {
                *ret = (mapping) {
                        .start = m->start,
                        .end = m->end,
                        .pgoff = m->pgoff,
                        .path = m->file->path,
                        .file_id = m->file->id,
                        .build_id = file_build_id(m->file),
                };
        }
        return 0;
}

static const char *parse_hex(const char *s, uint64_t *ret) {
        uint64_t v = 0;
        size_t n = 0;

        for (;; s++, n++) {
                int d;

                if (*s >= '0' && *s <= '9')
                        d = *s - '0';
                else if (*s >= 'a' && *s <= 'f')
                        d = *s - 'a' + 10;
                else
                        break;
                if (n >= 16)
                        return NULL;
                v = v << 4 | (uint64_t) d;
        }
        if (n == 0)
                return NULL;
        *ret = v;
        return s;
}

int proc_maps_parse_line(const char *line, uint64_t *ret_start, uint64_t *ret_end,
                         uint64_t *ret_pgoff, bool *ret_exec, const char **ret_path) {
        uint64_t start, end, pgoff, major, minor;
        const char *s = line, *perms;
        size_t inode_digits = 0;

        if (!line)
                return -EINVAL;

        /* show_vma_header_prefix() in fs/proc/task_mmu.c:
         *     "%08lx-%08lx %c%c%c%c %08llx %02x:%02x %lu "
         * then, for named mappings, padding spaces and the name (paths have
         * '\n' escaped as "\012", so a line never contains one). */
        s = parse_hex(s, &start);
        if (!s || *s++ != '-')
                return -EINVAL;
        s = parse_hex(s, &end);
        if (!s || *s++ != ' ')
                return -EINVAL;
        if (start >= end)
                return -EINVAL;

        perms = s;
        if (!(perms[0] == 'r' || perms[0] == '-') ||
            !(perms[1] == 'w' || perms[1] == '-') ||
            !(perms[2] == 'x' || perms[2] == '-') ||
            !(perms[3] == 'p' || perms[3] == 's') ||
            perms[4] != ' ')
                return -EINVAL;
        s = perms + 5;

        s = parse_hex(s, &pgoff);
        if (!s || *s++ != ' ')
                return -EINVAL;
        s = parse_hex(s, &major);
        if (!s || *s++ != ':')
                return -EINVAL;
        s = parse_hex(s, &minor);
        if (!s)
                return -EINVAL;
        if (*s++ != ' ')
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++)
                if (++inode_digits > 20)
                        return -EINVAL;
        if (inode_digits == 0)
                return -EINVAL;
        if (*s != ' ' && *s != 0)
                return -EINVAL;
        while (*s == ' ')
                s++;
        if (strchr(s, '\n'))
                return -EINVAL;

        *ret_start = start;
        *ret_end = end;
        *ret_pgoff = pgoff;
        *ret_exec = perms[2] == 'x';
        *ret_path = s;
        return *s == 0 ? -ENOENT : 0;
}

void tasks_gc(tasks *t, uint64_t before_ns) {
        if (!t)
                return;
        /* The lists are in the order tasks exited (records come in time
         * order): stop at the first that exited too recently, instead of
         * walking every exited task at every drain. */
        for (list_link *l = t->evict_processes.next, *next; l != &t->evict_processes; l = next) {
                process *p = CONTAINER_OF(l, process, evict);

                next = l->next;
                if (p->exited && p->exit_ns >= before_ns)
                        break;
                if (p->exited)
                        process_free(t, p);
        }
        for (list_link *l = t->evict_threads.next, *next; l != &t->evict_threads; l = next) {
                thread *th = CONTAINER_OF(l, thread, evict);

                next = l->next;
                if (th->exited && th->exit_ns >= before_ns)
                        break;
                if (th->exited)
                        thread_free(t, th);
        }
}

size_t tasks_n_threads(const tasks *t) {
        return t ? hashmap_size(t->threads) - t->n_thread_placeholders : 0;
}

size_t tasks_n_processes(const tasks *t) {
        return t ? hashmap_size(t->processes) - t->n_process_placeholders : 0;
}

size_t tasks_memory_bytes(const tasks *t) {
        int64_t v;
        size_t n;

        if (!t)
                return 0;
        n = sizeof *t;
        n += hashmap_memory_bytes(t->processes) + hashmap_memory_bytes(t->threads) + hashmap_memory_bytes(t->files);
        n += t->keybuf_size;
        n += hashmap_size(t->threads) * sizeof(thread);
        for (size_t i = 0; hashmap_iterate(t->processes, &i, &v);) {
                const process *p = HASHMAP_TO_PTR(v);
                n += sizeof *p + p->alloc_maps * sizeof(map_entry);
        }
        for (size_t i = 0; hashmap_iterate(t->files, &i, &v);) {
                const file_ref *f = HASHMAP_TO_PTR(v);
                n += sizeof *f + f->key_len + 1;
        }
        return n;
}

size_t tasks_n_mappings(const tasks *t, uint32_t pid) {
        const process *p;

        if (!t)
                return 0;
        p = process_get(t, pid);
        return p ? p->n_maps : 0;
}
