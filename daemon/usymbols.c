/* SPDX-License-Identifier: GPL-2.0-or-later */
/* User-space function tables kept by build-id (usymbols.h): the loop's
 * side (which build-ids were announced, the queue bound, the counters) and
 * the worker's (open, check, extract, write, prune). */

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/elfsyms.h"
#include "elf/symstore.h"
#include "fileio.h"
#include "hashmap.h"
#include "log.h"
#include "macro.h"
#include "timeparse.h"
#include "usymbols.h"
#include "workqueue.h"

/* Build-ids announced, forgotten past this many (announcing one again
 * costs the worker one faccessat()). */
#define SEEN_MAX (64 * 1024)

typedef enum job_result {
        JOB_EXTRACTED,
        JOB_KEPT_ALREADY,
        JOB_FAILED,
} job_result;

typedef struct usym_job {
        workqueue_item item;
        uint32_t pid;
        char build_id[BUILD_ID_HEX_MAX];
        char *path;
        char *debug_root;               /* copied: the configuration may change meanwhile */
        uint64_t max_bytes;
        /* results */
        job_result result;
        int error;
        const char *failed_what;        /* "open", "read", "save", "prune" */
        int debuginfod;                 /* 1: found there, -1: asked, not found, 0: not asked */
        elfsyms_source source;
        size_t n_symbols, n_inlined;
        uint64_t duration_ns;
        uint64_t pruned;
        symstore_usage left;
} usym_job;

struct usymbols {
        char *root, *cache_dir, *debug_root;
        uint64_t max_bytes;
        workqueue *queue;
        debuginfod_client *debuginfod;  /* NULL: debuginfod_urls is empty; used on the worker only */
        volatile sig_atomic_t stopping; /* a download in progress gives up */
        unsigned pending;
        hashmap *seen;                  /* build-id -> 1 */
        usymbols_stats stats;
};

static void job_free(usym_job *j) {
        if (!j)
                return;
        free(j->path);
        free(j->debug_root);
        free(j);
}

/* The file as pid sees it (resolved inside its root directory, so a
 * container's absolute links stay in the container), else as the daemon
 * does (inside ROOT); only a regular file is ever opened (no terminal,
 * device or FIFO a user may have put at the path). The build-id check
 * after it says whether it is the mapped file. */
static int open_binary(const char *root, uint32_t pid, const char *path) {
        int fd = -ENOENT;

        for (int k = 0; k < 2 && fd < 0; k++) {
                _cleanup_close_ int rfd = open_root_dir(root, k == 0 ? pid : 0);

                fd = rfd < 0 ? rfd : open_regular_file(rfd, path, false, NULL);
        }
        return fd;
}

/* Debug files are often links into /usr/lib/debug (the -dbgsym packages'
 * layout): followed, but only to a regular file. */
static int open_debug_file(const char *debug_root, const char *build_id) {
        char buf[PATH_MAX];
        int l;

        if (!debug_root || !debug_root[0] || strlen(build_id) < 3)
                return -ENOENT;
        l = snprintf(buf, sizeof buf, "%s/.build-id/%.2s/%s.debug", debug_root, build_id, build_id + 2);
        if (l < 0 || (size_t) l >= sizeof buf)
                return -ENAMETOOLONG;
        return open_regular_file(AT_FDCWD, buf, false, NULL);
}

/* A debug file a .gnu_debuglink led to, at fd: read only if it is the
 * binary's owner's, or anyone may read it. The name comes from the binary,
 * and a link beside it could lead to a file its owner may not read (the
 * build-id check alone would still parse it, as root). */
static int debuglink_allowed(int fd, const struct stat *bin) {
        struct stat st;

        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0 || (st.st_uid != bin->st_uid && !(st.st_mode & S_IROTH))) {
                close(fd);
                return -EPERM;
        }
        return fd;
}

/* The file a .gnu_debuglink of the binary at fd names: beside the binary
 * or in its .debug/ directory (as pid sees them, else as the daemon
 * does), else at the binary's path under debug_root (gdb's order). The
 * build-id check in elfsyms_read() says whether it is the binary's. */
static int open_debuglink(const char *root, uint32_t pid, const char *path, const char *debug_root, int fd) {
        char name[256], buf[PATH_MAX];
        const char *slash = strrchr(path, '/');
        struct stat bin;
        int dir_len, dfd = -ENOENT;

        if (!slash || fstat(fd, &bin) < 0 || elfsyms_debuglink(fd, name) < 0)
                return -ENOENT;
        dir_len = (int) (slash - path);
        for (int k = 0; k < 3 && dfd < 0; k++) {
                int l;

                if (k == 0 && streq(name, slash + 1))
                        continue;       /* the binary itself */
                if (k == 2 && (!debug_root || !debug_root[0]))
                        break;
                l = k == 0 ? snprintf(buf, sizeof buf, "%.*s/%s", dir_len, path, name)
                  : k == 1 ? snprintf(buf, sizeof buf, "%.*s/.debug/%s", dir_len, path, name)
                           : snprintf(buf, sizeof buf, "%s%.*s/%s", debug_root, dir_len, path, name);
                if (l < 0 || (size_t) l >= sizeof buf)
                        continue;       /* cut: another path */
                dfd = debuglink_allowed(k < 2 ? open_binary(root, pid, buf)
                                              : open_regular_file(AT_FDCWD, buf, false, NULL), &bin);
        }
        return dfd;
}

static void run_job_inner(usymbols *u, usym_job *j);

/* The worker's nice value: a table is wanted once per build-id, and
 * reading DWARF can take a busy CPU for a tenth of a second (libpython
 * 3.11 with its DWARF: 70 ms on an idle machine). */
#define WORKER_NICE 10

/* On the worker thread. A big file's symbols pass through this thread's
 * malloc arena (cc1: megabytes of names): given back to the system after
 * each file, or they would stay in the daemon's resident size. */
static void run_job(workqueue_item *item, void *userdata) {
        static __thread bool lowered;

        if (!lowered) {
                /* This thread only (Linux's nice is per thread). */
                (void) setpriority(PRIO_PROCESS, (id_t) gettid(), WORKER_NICE);
                lowered = true;
        }
        run_job_inner(userdata, (usym_job *) item);
        malloc_trim(0);
}

static void run_job_inner(usymbols *u, usym_job *j) {
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        _cleanup_close_ int fd = -1, dfd = -1;
        elfsyms *s = NULL;
        int r;

        if (symstore_has(u->cache_dir, j->build_id)) {
                j->result = JOB_KEPT_ALREADY;
                return;
        }
        j->result = JOB_FAILED;
        fd = open_binary(u->root, j->pid, j->path);
        if (fd < 0) {
                j->error = fd;
                j->failed_what = "open";
                return;
        }
        dfd = open_debug_file(j->debug_root, j->build_id);
        if (dfd < 0)
                dfd = open_debuglink(u->root, j->pid, j->path, j->debug_root, fd);
        r = elfsyms_read(fd, j->build_id, dfd, &s);
        if (r < 0 && dfd >= 0)
                /* A debug file that does not fit: the binary's own tables. */
                r = elfsyms_read(fd, j->build_id, -1, &s);
        if (r < 0) {
                j->error = r;
                j->failed_what = "read";
                return;
        }
        if (u->debuginfod && (s->source == ELFSYMS_DYNSYM || s->source == ELFSYMS_NONE)) {
                _cleanup_free_ char *cached = NULL;
                _cleanup_close_ int rfd = debuginfod_find_debuginfo(u->debuginfod, (const unsigned char *) j->build_id,
                                                                    0, &cached);
                elfsyms *d = NULL;

                j->debuginfod = -1;
                /* Only a debug file with functions replaces the .dynsym's. */
                if (rfd >= 0 && elfsyms_read(fd, j->build_id, rfd, &d) >= 0 && d->n > 0) {
                        elfsyms_free(s);
                        s = TAKE_PTR(d);
                        j->debuginfod = 1;
                }
                elfsyms_free(d);
                /* The table is what is kept: the download goes, so the
                 * cache does not grow with every stripped binary sampled. */
                if (cached)
                        (void) unlink(cached);
        }
        j->source = s->source;
        j->n_symbols = s->n;
        j->n_inlined = s->n_inl;
        r = symstore_save(u->cache_dir, s);
        elfsyms_free(s);
        if (r == -EEXIST) {
                j->result = JOB_KEPT_ALREADY;
                return;
        }
        if (r < 0) {
                j->error = r;
                j->failed_what = "save";
                return;
        }
        j->result = JOB_EXTRACTED;
        j->duration_ns = clock_ns(CLOCK_MONOTONIC) - t0;
        r = symstore_prune(u->cache_dir, j->max_bytes, &j->left, &j->pruned);
        if (r < 0) {
                j->error = r;
                j->failed_what = "prune";
        }
}

static void drop_job(workqueue_item *item, void *userdata) {
        job_free((usym_job *) item);
}

static const char *source_name(elfsyms_source s) {
        switch (s) {
        case ELFSYMS_SYMTAB: return ".symtab";
        case ELFSYMS_DYNSYM: return ".dynsym";
        case ELFSYMS_DEBUG: return "its debug file";
        case ELFSYMS_DWARF: return "DWARF";
        default: return "no function symbols";
        }
}

/* On the loop. */
static void job_done(workqueue_item *item, void *userdata) {
        usymbols *u = userdata;
        usym_job *j = (usym_job *) item;

        u->pending--;
        if (j->debuginfod > 0)
                u->stats.debuginfod_found++;
        else if (j->debuginfod < 0)
                u->stats.debuginfod_missed++;
        switch (j->result) {
        case JOB_KEPT_ALREADY:
                u->stats.kept_already++;
                break;
        case JOB_EXTRACTED:
                u->stats.extracted++;
                if (j->source == ELFSYMS_NONE)
                        u->stats.no_symbols++;
                u->stats.last_ns = j->duration_ns;
                u->stats.max_ns = MAX(u->stats.max_ns, j->duration_ns);
                u->stats.pruned += j->pruned;
                if (!j->failed_what) {
                        u->stats.tables = j->left.tables;
                        u->stats.bytes = j->left.bytes;
                }
                log_debug("Kept %zu functions and %zu pieces of inlined code of %s (build-id %s, from %s) in %.1f ms.",
                          j->n_symbols, j->n_inlined, j->path, j->build_id, source_name(j->source),
                          (double) j->duration_ns / 1e6);
                if (j->pruned > 0)
                        log_info("Removed %llu function tables (least recently used) to stay within "
                                 "symbols_max_size.", (unsigned long long) j->pruned);
                if (j->failed_what)
                        log_warning_errno(j->error, "Failed to prune the function tables in %s/%s: %m",
                                          u->cache_dir, SYMSTORE_DIR);
                break;
        case JOB_FAILED:
                u->stats.failed++;
                u->stats.last_error = j->error;
                u->stats.last_failed_what = j->failed_what;
                log_debug_errno(j->error, "No function table for %s (build-id %s, pid %u): %s: %m", j->path,
                                j->build_id, j->pid, j->failed_what);
                break;
        }
        job_free(j);
}

bool usymbols_file_seen(uint32_t pid, const char *path, const char *build_id, void *userdata) {
        usymbols *u = userdata;
        size_t len = strlen(build_id);
        int64_t unused;
        usym_job *j;

        if (!u || len == 0 || len >= BUILD_ID_HEX_MAX)
                return true;
        if (hashmap_get(u->seen, build_id, len, &unused) >= 0)
                return true;
        if (u->pending >= USYMBOLS_MAX_PENDING) {
                u->stats.dropped++;
                return false;
        }
        j = calloc(1, sizeof *j);
        if (!j)
                return false;
        j->pid = pid;
        memcpy(j->build_id, build_id, len + 1);
        j->path = strdup(path);
        j->debug_root = strdup(u->debug_root);
        j->max_bytes = u->max_bytes;
        if (!j->path || !j->debug_root) {
                job_free(j);
                return false;
        }
        if (hashmap_size(u->seen) >= SEEN_MAX)
                hashmap_clear(u->seen);
        if (hashmap_put(u->seen, build_id, len, 1) < 0) {
                job_free(j);
                return false;
        }
        u->stats.seen++;
        u->pending++;
        workqueue_submit(u->queue, &j->item);
        return true;
}

void usymbols_reconfigure(usymbols *u, const config *c) {
        char *d;

        if (!u)
                return;
        u->max_bytes = c->symbols_max_size_bytes;
        d = strdup(c->debug_root);
        if (d) {
                free(u->debug_root);
                u->debug_root = d;
        }
}

/* libdebuginfod calls it as a download progresses: non-zero gives up,
 * so a stop does not wait for a download. */
static int download_progress(debuginfod_client *c, long done, long total) {
        const usymbols *u = debuginfod_get_user_data(c);

        (void) done;
        (void) total;
        return u->stopping ? 1 : 0;
}

int usymbols_new(struct event_base *base, const config *c, usymbols **ret) {
        usymbols *u;
        int r;

        *ret = NULL;
        if (!c->cache_dir[0])
                return 0;
        u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        u->root = strdup(c->root);
        u->cache_dir = strdup(c->cache_dir);
        u->debug_root = strdup(c->debug_root);
        u->max_bytes = c->symbols_max_size_bytes;
        r = u->root && u->cache_dir && u->debug_root ? hashmap_new(&u->seen) : -ENOMEM;
        if (r >= 0 && c->debuginfod_urls[0]) {
                u->debuginfod = debuginfod_begin();
                if (!u->debuginfod)
                        r = -ENOMEM;
                else {
                        debuginfod_set_user_data(u->debuginfod, u);
                        debuginfod_set_progressfn(u->debuginfod, download_progress);
                }
        }
        if (r >= 0)
                r = workqueue_new(base, "psd-symbols", run_job, job_done, u, &u->queue);
        if (r < 0) {
                usymbols_free(u);
                return r;
        }
        *ret = u;
        return 0;
}

usymbols *usymbols_free(usymbols *u) {
        if (!u)
                return NULL;
        u->stopping = 1;
        workqueue_free(u->queue, drop_job);
        if (u->debuginfod)
                debuginfod_end(u->debuginfod);
        hashmap_free(u->seen);
        free(u->root);
        free(u->cache_dir);
        free(u->debug_root);
        free(u);
        return NULL;
}

int usymbols_setup_env(const config *c) {
        char buf[PATH_MAX + 32];
        unsigned secs = (unsigned) (c->debuginfod_timeout_ns / 1000000000u);

        /* Nothing from the caller's environment (Debian sets DEBUGINFOD_URLS
         * in login shells): only what the configuration says. */
        static const char *const vars[] = { DEBUGINFOD_URLS_ENV_VAR, DEBUGINFOD_PROGRESS_ENV_VAR,
                                            DEBUGINFOD_VERBOSE_ENV_VAR, DEBUGINFOD_HEADERS_FILE_ENV_VAR };
        for (size_t i = 0; i < ELEMENTSOF(vars); i++)
                if (unsetenv(vars[i]) < 0)
                        return negative_errno();
        if (!c->debuginfod_urls[0] || !c->cache_dir[0])
                return 0;
        if (setenv(DEBUGINFOD_URLS_ENV_VAR, c->debuginfod_urls, 1) < 0)
                return negative_errno();
        snprintf(buf, sizeof buf, "%s/.debuginfod", c->cache_dir);
        if (setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, buf, 1) < 0)
                return negative_errno();
        /* DEBUGINFOD_TIMEOUT: seconds without progress; MAXTIME: a whole
         * download. */
        snprintf(buf, sizeof buf, "%u", secs);
        if (setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, buf, 1) < 0)
                return negative_errno();
        snprintf(buf, sizeof buf, "%u", secs * 4);
        if (setenv(DEBUGINFOD_MAXTIME_ENV_VAR, buf, 1) < 0)
                return negative_errno();
        /* Larger debug files are not downloaded (the table of one is
         * what is kept; the download is removed after it is read). */
        if (setenv(DEBUGINFOD_MAXSIZE_ENV_VAR, "536870912", 1) < 0)
                return negative_errno();
        return 0;
}

const usymbols_stats *usymbols_get_stats(const usymbols *u) {
        static const usymbols_stats none;

        return u ? &u->stats : &none;
}
