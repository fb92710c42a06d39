/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The function tables of user-space files by build-id (symstore.h). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf/symstore.h"
#include "fileio.h"
#include "kernel/snapshot.h"
#include "macro.h"

static bool build_id_name_valid(const char *id) {
        size_t n = strlen(id);

        if (n < 2 || n >= BUILD_ID_HEX_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
                        return false;
        return true;
}

/* CACHE/.symbols, made 0700 with create. */
static int open_store(const char *cache_dir, bool create) {
        _cleanup_close_ int cfd = snapshot_cache_open(cache_dir, create);
        int fd;

        if (cfd < 0)
                return cfd;
        if (create && mkdirat(cfd, SYMSTORE_DIR, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(cfd, SYMSTORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

int symstore_save(const char *cache_dir, const elfsyms *s) {
        _cleanup_close_ int dfd = -1, fd = -1;
        _cleanup_free_ char *data = NULL;
        char tmp[BUILD_ID_HEX_MAX + 16];
        size_t size;
        int r;

        if (!build_id_name_valid(s->build_id))
                return -EINVAL;
        r = elfsyms_encode(s, &data, &size);
        if (r < 0)
                return r;
        dfd = open_store(cache_dir, true);
        if (dfd < 0)
                return dfd;
        if (faccessat(dfd, s->build_id, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;

        snprintf(tmp, sizeof tmp, ".tmp-%s", s->build_id);
        /* A name left by a daemon that died mid-write: never reused as it is. */
        if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
                return negative_errno();
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
        if (fd < 0)
                return negative_errno();
        r = write_full_fd(fd, data, size);
        /* On disk before it has its name: a table torn by a crash would
         * count as kept for ever. */
        if (r >= 0 && (fchmod(fd, 0400) < 0 || fsync(fd) < 0))
                r = negative_errno();
        if (r >= 0 && renameat(dfd, tmp, dfd, s->build_id) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(dfd, tmp, 0);
        return r;
}

int symstore_load(const char *cache_dir, const char *build_id, bool touch, elfsyms **ret) {
        _cleanup_close_ int dfd = -1, fd = -1;
        _cleanup_free_ char *data = NULL;
        elfsyms *s;
        size_t size;
        int r;

        if (!build_id_name_valid(build_id))
                return -ENOENT;
        dfd = open_store(cache_dir, false);
        if (dfd < 0)
                return dfd;
        fd = openat(dfd, build_id, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = read_full_fd(fd, ELFSYMS_FILE_MAX, &data, &size);
        if (r < 0)
                return r;
        r = elfsyms_decode(data, size, &s);
        if (r < 0)
                return r;
        if (!streq(s->build_id, build_id)) {
                elfsyms_free(s);
                return -EBADMSG;
        }
        if (touch)
                (void) futimens(fd, NULL);
        *ret = s;
        return 0;
}

bool symstore_has(const char *cache_dir, const char *build_id) {
        _cleanup_close_ int dfd = -1;

        if (!build_id_name_valid(build_id))
                return false;
        dfd = open_store(cache_dir, false);
        return dfd >= 0 && faccessat(dfd, build_id, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

typedef struct entry {
        char name[BUILD_ID_HEX_MAX];
        struct timespec used;
        uint64_t bytes;
} entry;

static int entry_cmp(const void *x, const void *y) {
        const entry *a = x, *b = y;

        if (a->used.tv_sec != b->used.tv_sec)
                return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
        if (a->used.tv_nsec != b->used.tv_nsec)
                return a->used.tv_nsec < b->used.tv_nsec ? -1 : 1;
        return strcmp(a->name, b->name);
}

int symstore_prune(const char *cache_dir, uint64_t max_bytes, symstore_usage *ret_left, uint64_t *ret_removed) {
        _cleanup_close_ int dfd = -1;
        _cleanup_free_ entry *v = NULL;
        size_t n = 0, alloc = 0;
        uint64_t total = 0, removed = 0;
        struct dirent *de;
        DIR *d;

        *ret_left = (symstore_usage) {};
        if (ret_removed)
                *ret_removed = 0;
        dfd = open_store(cache_dir, false);
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return dfd;
        d = fdopendir(dfd);
        if (!d)
                return negative_errno();
        dfd = -1;       /* owned by d now */
        while ((de = readdir(d))) {
                struct stat st;

                if (!build_id_name_valid(de->d_name))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (GREEDY_REALLOC(v, alloc, n + 1) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                v[n] = (entry) { .used = st.st_mtim, .bytes = (uint64_t) st.st_size };
                memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1);      /* < BUILD_ID_HEX_MAX, checked */
                total += v[n].bytes;
                n++;
        }
        qsort(v, n, sizeof *v, entry_cmp);
        for (size_t i = 0; i < n && max_bytes > 0 && total > max_bytes; i++) {
                if (unlinkat(dirfd(d), v[i].name, 0) < 0)
                        continue;
                total -= v[i].bytes;
                removed++;
        }
        closedir(d);
        *ret_left = (symstore_usage) { .tables = n - removed, .bytes = total };
        if (ret_removed)
                *ret_removed = removed;
        return 0;
}
