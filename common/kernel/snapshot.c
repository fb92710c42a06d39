/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Snapshots of the kernel's code in perf's build-id cache layout; see
 * snapshot.h. perf finds a snapshot by walking
 * CACHE/[kernel.kcore]/<build-id>/ and matching each directory's modules
 * and kallsyms (_text) with the kernel it decodes, so those two files must
 * be the kernel's own bytes, and a directory there must be complete. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "kernel/kallsyms.h"
#include "kernel/kcore.h"
#include "kernel/layout.h"
#include "kernel/modules.h"
#include "kernel/snapshot.h"
#include "log.h"
#include "macro.h"
#include "timeparse.h"

/* kallsyms of a distribution kernel is ~10 MiB; modules a few KiB. */
#define SNAPSHOT_KALLSYMS_MAX_BYTES (64u * 1024u * 1024u)
#define SNAPSHOT_MODULES_MAX_BYTES (4u * 1024u * 1024u)
/* Two snapshots in the same hundredth of a second: the later one's name
 * moves on by hundredths until it is free. */
#define SNAPSHOT_NAME_TRIES 100
#define HUNDREDTH_NS (NSEC_PER_SEC / 100)

void snapshot_info_done(snapshot_info *s) {
        if (s) {
                free(s->path);
                s->path = NULL;
        }
}

void snapshot_infos_free(snapshot_info *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                snapshot_info_done(v + i);
        free(v);
}

int snapshot_name_from_time(uint64_t wall_ns, char ret[static SNAPSHOT_NAME_LEN + 1]) {
        time_t sec = (time_t) (wall_ns / NSEC_PER_SEC);
        struct tm tm;
        char buf[15];

        if (!localtime_r(&sec, &tm) || tm.tm_year + 1900 < 1000 || tm.tm_year + 1900 > 9999)
                return -EINVAL;
        if (strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm) != 14)
                return -EINVAL;
        memcpy(ret, buf, 14);
        ret[14] = (char) ('0' + wall_ns % NSEC_PER_SEC / HUNDREDTH_NS / 10);
        ret[15] = (char) ('0' + wall_ns % NSEC_PER_SEC / HUNDREDTH_NS % 10);
        ret[16] = '\0';
        return 0;
}

int snapshot_time_from_name(const char *name, uint64_t *ret_ns) {
        struct tm tm = { .tm_isdst = -1 };
        unsigned v[7];
        time_t t;

        if (!name || strlen(name) != SNAPSHOT_NAME_LEN || strspn(name, "0123456789") != SNAPSHOT_NAME_LEN)
                return -EINVAL;
        if (sscanf(name, "%4u%2u%2u%2u%2u%2u%2u", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) != 7)
                return -EINVAL;
        if (v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 || v[4] > 59 || v[5] > 60)
                return -EINVAL;
        tm.tm_year = (int) v[0] - 1900;
        tm.tm_mon = (int) v[1] - 1;
        tm.tm_mday = (int) v[2];
        tm.tm_hour = (int) v[3];
        tm.tm_min = (int) v[4];
        tm.tm_sec = (int) v[5];
        t = mktime(&tm);
        if (t == (time_t) -1 || t < 0 || tm.tm_mday != (int) v[2])      /* 31 February */
                return -EINVAL;
        *ret_ns = (uint64_t) t * NSEC_PER_SEC + v[6] * HUNDREDTH_NS;
        return 0;
}

/* ---- reading kallsyms and modules ------------------------------------ */

uint64_t snapshot_text_addr_from_kallsyms(const char *text, size_t len) {
        uint64_t addr = 0;

        return kallsyms_text_addr_from_text(text, len, &addr) >= 0 ? addr : 0;
}

/* The address of _text (else _stext) in the kallsyms text of f, read
 * only up to the _text line (near its start), in *ret: 0, -ENOENT if
 * there is neither, -EFBIG past SNAPSHOT_KALLSYMS_MAX_BYTES, or the error
 * of the read. */
static int text_addr_from_stream(FILE *f, uint64_t *ret) {
        _cleanup_free_ char *line = NULL;
        uint64_t stext = 0, bytes = 0;
        bool have_stext = false;
        size_t alloc = 0;
        ssize_t n;

        errno = 0;
        while ((n = getline(&line, &alloc, f)) > 0) {
                kallsyms_line l;

                bytes += (uint64_t) n;
                if (bytes > SNAPSHOT_KALLSYMS_MAX_BYTES)
                        return -EFBIG;
                if (line[n - 1] == '\n')
                        n--;
                if (!kallsyms_line_parse(line, (size_t) n, &l))
                        continue;
                switch (kallsyms_line_text_rank(&l)) {
                case 2:
                        *ret = l.addr;
                        return 0;
                case 1:
                        if (!have_stext) {
                                stext = l.addr;
                                have_stext = true;
                        }
                }
        }
        if (ferror(f))
                return errno > 0 ? -errno : -EIO;
        if (!have_stext)
                return -ENOENT;
        *ret = stext;
        return 0;
}

/* The same for dfd/name, a file of the cache (not followed if a link;
 * 0 if it cannot be read or names neither). */
static uint64_t text_addr_from_file_at(int dfd, const char *name) {
        int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        uint64_t addr = 0;

        if (!f) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        return text_addr_from_stream(f, &addr) < 0 ? 0 : addr;
}

/* A line of dynamic code: its module column is [bpf] or [__builtin__*]. */
static bool is_dynamic_line(const char *line, size_t n) {
        const char *tab = memchr(line, '\t', n), *end;
        char module[64];
        layout_ksym_type type;

        if (!tab || (size_t) (tab - line) + 2 >= n || tab[1] != '[')
                return false;
        end = memchr(tab + 2, ']', n - (size_t) (tab + 2 - line));
        if (!end || (size_t) (end - (tab + 2)) >= sizeof module)
                return false;
        memcpy(module, tab + 2, (size_t) (end - (tab + 2)));
        module[end - (tab + 2)] = '\0';
        return layout_ksym_type_from_kallsyms(module, &type) >= 0;
}

/* The next line at *pos that is not dynamic code; false at the end. */
static bool next_code_line(const char *text, size_t len, size_t *pos, const char **ret, size_t *ret_n) {
        while (*pos < len) {
                const char *line = text + *pos;
                const char *nl = memchr(line, '\n', len - *pos);
                size_t n = nl ? (size_t) (nl - line) : len - *pos;

                *pos += n + 1;
                if (!is_dynamic_line(line, n)) {
                        *ret = line;
                        *ret_n = n;
                        return true;
                }
        }
        return false;
}

bool snapshot_kallsyms_same_code(const char *a, size_t a_len, const char *b, size_t b_len) {
        size_t pa = 0, pb = 0;

        for (;;) {
                const char *la, *lb;
                size_t na, nb;
                bool more_a = next_code_line(a, a_len, &pa, &la, &na);
                bool more_b = next_code_line(b, b_len, &pb, &lb, &nb);

                if (more_a != more_b)
                        return false;
                if (!more_a)
                        return true;
                if (na != nb || memcmp(la, lb, na) != 0)
                        return false;
        }
}

static int cmp_module(const void *a, const void *b) {
        const proc_module *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        return c ?: (x->base > y->base) - (x->base < y->base);
}

/* Modules of /proc/modules text as a sorted list of (name, base). */
static int parse_modules(const char *text, size_t len, proc_module **ret, size_t *ret_n) {
        proc_module *v = NULL;
        size_t n = 0;
        int r;

        r = proc_modules_parse(text, len, &v, &n, NULL);
        if (r < 0)
                return r;
        if (n > 0)
                qsort(v, n, sizeof *v, cmp_module);
        *ret = v;
        *ret_n = n;
        return 0;
}

static bool same_modules(const proc_module *a, size_t na, const proc_module *b, size_t nb) {
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq(a[i].name, b[i].name) || a[i].base != b[i].base)
                        return false;
        return true;
}

/* ---- the cache, by directory descriptors ---------------------------------- */

/* Everything below the cache root is reached from a descriptor of its
 * parent, one name at a time, never through a symbolic link: a link
 * planted in the cache (by whoever could write there) is an error, not a
 * way out of it. */

static int open_dir_at(int dfd, const char *name) {
        int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? negative_errno() : fd;
}

/* name below dfd, made with mode if missing. */
static int make_dir_at(int dfd, const char *name, mode_t mode) {
        if (mkdirat(dfd, name, mode) < 0 && errno != EEXIST)
                return negative_errno();
        return open_dir_at(dfd, name);
}

/* The cache root: made 0700 if missing, opened without following a link,
 * refused unless root's (or the caller's) and writable by nobody else
 * (check_fd_private()). */
int snapshot_cache_open(const char *cache_dir, bool create) {
        _cleanup_close_ int fd = -1;
        const char *why = NULL;
        int r;

        if (create && mkdir(cache_dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = check_fd_private(fd, &why);
        if (r < 0)
                return log_debug_errno(r, "Refusing the cache %s: %s.", cache_dir, why);
        return TAKE_FD(fd);
}

/* CACHE/[kernel.kcore]/build_id, and in *ret_kfd [kernel.kcore]. */
static int open_build_id_dir(int cfd, const char *build_id, int *ret_kfd) {
        _cleanup_close_ int kfd = open_dir_at(cfd, SNAPSHOT_KCORE_DIR);
        int bfd;

        if (kfd < 0)
                return kfd;
        bfd = open_dir_at(kfd, build_id);
        if (bfd < 0)
                return bfd;
        *ret_kfd = TAKE_FD(kfd);
        return bfd;
}

/* A regular file below dfd, read whole. */
static int read_file_at(int dfd, const char *name, size_t max_bytes, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;

        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        return read_full_fd(fd, max_bytes, ret, ret_size);
}

/* ---- listing ---------------------------------------------------------- */

static int info_fill(int bfd, const char *build_id, const char *name, char *path, snapshot_info *ret) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ proc_module *mods = NULL;
        _cleanup_close_ int dfd = -1;
        snapshot_info s = { .path = path };
        size_t n_mods = 0, len = 0;
        struct stat st;
        int r;

        if (strlen(build_id) >= sizeof s.build_id)
                return -EINVAL;
        r = snapshot_time_from_name(name, &s.time_ns);
        if (r < 0)
                return r;
        strcpy(s.build_id, build_id);
        strcpy(s.name, name);

        dfd = open_dir_at(bfd, name);
        if (dfd < 0)
                return dfd;
        /* perf needs kallsyms and modules; without them it is no snapshot. */
        if (fstatat(dfd, "kallsyms", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return -ENOENT;
        s.size_bytes += (uint64_t) st.st_size;
        if (fstatat(dfd, "modules", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return -ENOENT;
        s.size_bytes += (uint64_t) st.st_size;
        if (fstatat(dfd, "kcore", &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISREG(st.st_mode)) {
                s.has_kcore = true;
                s.size_bytes += (uint64_t) st.st_size;
        }

        if (read_file_at(dfd, "modules", SNAPSHOT_MODULES_MAX_BYTES, &text, &len) >= 0 &&
            parse_modules(text, len, &mods, &n_mods) >= 0)
                s.n_modules = n_mods;
        s.text_addr = text_addr_from_file_at(dfd, "kallsyms");
        *ret = s;
        return 0;
}

static int cmp_info(const void *a, const void *b) {
        const snapshot_info *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        return c ?: strcmp(x->build_id, y->build_id);
}

int snapshot_list(const char *cache_dir, snapshot_info **ret, size_t *ret_n) {
        _cleanup_free_ char *top = path_join(cache_dir, SNAPSHOT_KCORE_DIR);
        _cleanup_close_ int cfd = -1, kfd = -1;
        _cleanup_(closedirp) DIR *d = NULL;
        snapshot_info *v = NULL;
        size_t n = 0, alloc = 0;
        struct dirent *de;
        int r = 0;

        if (!top)
                return -ENOMEM;
        cfd = snapshot_cache_open(cache_dir, false);
        kfd = cfd >= 0 ? open_dir_at(cfd, SNAPSHOT_KCORE_DIR) : cfd;
        if (kfd == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (kfd < 0)
                return kfd;
        d = fdopendir(kfd);
        if (!d)
                return negative_errno();
        kfd = -1;       /* d owns it */
        while ((de = readdir(d))) {
                _cleanup_free_ char *bdir = NULL;
                _cleanup_(closedirp) DIR *b = NULL;
                struct dirent *se;
                int bfd;

                if (de->d_name[0] == '.' || strlen(de->d_name) >= BUILD_ID_HEX_MAX)
                        continue;
                bdir = path_join(top, de->d_name);
                if (!bdir) {
                        r = -ENOMEM;
                        break;
                }
                bfd = open_dir_at(dirfd(d), de->d_name);
                if (bfd < 0)
                        continue;
                b = fdopendir(bfd);
                if (!b) {
                        close(bfd);
                        continue;
                }
                while ((se = readdir(b))) {
                        uint64_t t;
                        char *path;

                        if (snapshot_time_from_name(se->d_name, &t) < 0)
                                continue;
                        if (n == alloc) {
                                snapshot_info *nv = reallocarray(v, alloc ? alloc * 2 : 16, sizeof *v);
                                if (!nv) {
                                        r = -ENOMEM;
                                        break;
                                }
                                v = nv;
                                alloc = alloc ? alloc * 2 : 16;
                        }
                        path = path_join(bdir, se->d_name);
                        if (!path) {
                                r = -ENOMEM;
                                break;
                        }
                        /* Removed meanwhile, or not a snapshot: skipped. */
                        if (info_fill(dirfd(b), de->d_name, se->d_name, path, v + n) < 0)
                                free(path);
                        else
                                n++;
                }
                if (r < 0)
                        break;
        }
        if (r < 0) {
                snapshot_infos_free(v, n);
                return r;
        }
        if (n > 0)
                qsort(v, n, sizeof *v, cmp_info);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- removing ---------------------------------------------------------- */

/* Removes a directory of files (and of directories of files: .tmp holds
 * snapshot directories). depth bounds the recursion. */
static int remove_tree_at(int parent, const char *name, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd, r = 0;

        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOTDIR || errno == ELOOP ?
                        (unlinkat(parent, name, 0) < 0 ? negative_errno() : 0) : negative_errno();
        d = fdopendir(fd);
        if (!d) {
                r = negative_errno();
                close(fd);
                return r;
        }
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) >= 0)
                        continue;
                if (errno == EISDIR && depth > 0)
                        r = remove_tree_at(dirfd(d), de->d_name, depth - 1) ?: r;
                else if (errno != ENOENT)
                        r = negative_errno();
        }
        if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = r ?: negative_errno();
        return r;
}

/* Moves build_id/name into CACHE/.tmp/ (one rename: it disappears from
 * the cache at once) and deletes it there; then the build-id directory if
 * that left it empty (perf makes it again). */
static int remove_snapshot(int cfd, const char *build_id, const char *name) {
        _cleanup_close_ int tfd = -1, kfd = -1, bfd = -1;
        char dest[128];

        tfd = make_dir_at(cfd, SNAPSHOT_TMP_DIR, 0700);
        if (tfd < 0)
                return tfd;
        bfd = open_build_id_dir(cfd, build_id, &kfd);
        if (bfd < 0)
                return bfd;
        snprintf(dest, sizeof dest, "prune-%s-%d-%ld", name, (int) getpid(),
                 (long) (clock_ns(CLOCK_MONOTONIC) % 1000000000));
        if (renameat(bfd, name, tfd, dest) < 0)
                return negative_errno();
        (void) unlinkat(kfd, build_id, AT_REMOVEDIR);
        return remove_tree_at(tfd, dest, 0);
}

int snapshot_clean_tmp(const char *cache_dir) {
        _cleanup_close_ int cfd = -1, tfd = -1;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int n = 0, r = 0;

        cfd = snapshot_cache_open(cache_dir, false);
        tfd = cfd >= 0 ? open_dir_at(cfd, SNAPSHOT_TMP_DIR) : cfd;
        if (tfd < 0)
                return tfd == -ENOENT ? 0 : tfd;
        d = fdopendir(tfd);
        if (!d)
                return negative_errno();
        tfd = -1;       /* d owns it */
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = remove_tree_at(dirfd(d), de->d_name, 1);
                if (r < 0)
                        return r;
                n++;
        }
        return n;
}

static int snapshot_prune_empty(snapshot_info **ret_removed, size_t *ret_n_removed, size_t *ret_n_left,
                                uint64_t *ret_size_left) {
        if (ret_removed)
                *ret_removed = NULL;
        if (ret_n_removed)
                *ret_n_removed = 0;
        if (ret_n_left)
                *ret_n_left = 0;
        if (ret_size_left)
                *ret_size_left = 0;
        return 0;
}

int snapshot_prune(const char *cache_dir, const snapshot_prune_limits *lim, snapshot_info **ret_removed,
                   size_t *ret_n_removed, size_t *ret_n_left, uint64_t *ret_size_left) {
        snapshot_info *v = NULL, *removed = NULL;
        _cleanup_close_ int cfd = -1;
        size_t n = 0, n_removed = 0, n_left;
        uint64_t total = 0;
        int r;

        cfd = snapshot_cache_open(cache_dir, false);
        if (cfd == -ENOENT)
                return snapshot_prune_empty(ret_removed, ret_n_removed, ret_n_left, ret_size_left);
        if (cfd < 0)
                return cfd;
        r = snapshot_list(cache_dir, &v, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                total += v[i].size_bytes;
        n_left = n;
        if (n > 0) {
                removed = calloc(n, sizeof *removed);
                if (!removed) {
                        snapshot_infos_free(v, n);
                        return -ENOMEM;
                }
        }
        /* v is oldest first; the last one is the newest, always kept. */
        for (size_t i = 0; i + 1 < n; i++) {
                bool too_old = lim->max_age_ns > 0 && lim->now_ns > v[i].time_ns &&
                               lim->now_ns - v[i].time_ns > lim->max_age_ns;
                bool too_big = lim->max_size_bytes > 0 && total > lim->max_size_bytes;

                if (!too_old && !too_big)
                        continue;
                if (lim->keep && streq(lim->keep, v[i].path))
                        continue;
                r = remove_snapshot(cfd, v[i].build_id, v[i].name);
                if (r < 0 && r != -ENOENT)
                        break;
                r = 0;
                total -= v[i].size_bytes;
                n_left--;
                removed[n_removed++] = v[i];
                v[i].path = NULL;
        }
        snapshot_infos_free(v, n);
        if (r < 0) {
                snapshot_infos_free(removed, n_removed);
                return r;
        }
        if (ret_removed)
                *ret_removed = removed;
        else
                snapshot_infos_free(removed, n_removed);
        if (ret_n_removed)
                *ret_n_removed = n_removed;
        if (ret_n_left)
                *ret_n_left = n_left;
        if (ret_size_left)
                *ret_size_left = total;
        return 0;
}

/* ---- taking ------------------------------------------------------------ */

typedef struct source {
        char *kallsyms, *modules;
        size_t kallsyms_len, modules_len;
        proc_module *mods;
        size_t n_mods;
        uint64_t text_addr;
} source;

static void source_done(source *s) {
        free(s->kallsyms);
        free(s->modules);
        free(s->mods);
        *s = (source) {};
}

/* proc/modules, into s. */
static int source_read_modules(const char *root, source *s) {
        int r;

        r = read_full_file_at(root, "proc/modules", SNAPSHOT_MODULES_MAX_BYTES, &s->modules, &s->modules_len);
        /* A kernel without loadable modules has no proc/modules:
         * its snapshot gets an empty one. */
        if (r == -ENOENT) {
                s->modules = strdup("");
                r = s->modules ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        return parse_modules(s->modules, s->modules_len, &s->mods, &s->n_mods);
}

/* All-zero addresses: the reader may not see them (kptr_restrict); such
 * a kallsyms is useless to perf. */
static int check_text_addr(const source *s) {
        return s->text_addr == 0 ? -EPERM : 0;
}

/* What deciding on reuse takes: proc/modules, and _text's address from
 * the head of proc/kallsyms. The kernel formats that file as it is read
 * (~40 ms of CPU for 122,000 lines), which a daemon restarted on the same
 * boot need not spend: source_read_kallsyms() reads the rest when a new
 * snapshot is made. */
static int source_read(const char *root, source *ret) {
        _cleanup_free_ char *path = path_join(root, "proc/kallsyms");
        _cleanup_fclose_ FILE *f = NULL;
        source s = {};
        int r;

        if (!path)
                return -ENOMEM;
        r = source_read_modules(root, &s);
        if (r >= 0) {
                f = fopen(path, "re");
                r = f ? 0 : negative_errno();
        }
        if (r >= 0) {
                r = text_addr_from_stream(f, &s.text_addr);
                /* No _text, no _stext: no address perf could use either. */
                if (r >= 0 || r == -ENOENT)
                        r = check_text_addr(&s);
        }
        if (r < 0) {
                source_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

/* All of proc/kallsyms, into s. */
static int source_read_kallsyms(const char *root, source *s) {
        int r;

        r = read_full_file_at(root, "proc/kallsyms", SNAPSHOT_KALLSYMS_MAX_BYTES, &s->kallsyms, &s->kallsyms_len);
        if (r < 0)
                return r;
        s->text_addr = snapshot_text_addr_from_kallsyms(s->kallsyms, s->kallsyms_len);
        return check_text_addr(s);
}

/* An existing snapshot of this kernel that matches src. */
/* CACHE/[kernel.kcore]/build_id/name/file, read whole. */
static int read_snapshot_file(int cfd, const char *build_id, const char *name, const char *file, size_t max_bytes,
                              char **ret, size_t *ret_size) {
        _cleanup_close_ int kfd = -1, bfd = -1, sfd = -1;

        bfd = open_build_id_dir(cfd, build_id, &kfd);
        if (bfd < 0)
                return bfd;
        sfd = open_dir_at(bfd, name);
        if (sfd < 0)
                return sfd;
        return read_file_at(sfd, file, max_bytes, ret, ret_size);
}

static int find_reusable(int cfd, const char *cache_dir, const char *build_id, const source *src, bool want_kcore,
                         snapshot_info *ret) {
        snapshot_info *v = NULL;
        size_t n = 0;
        int r;

        r = snapshot_list(cache_dir, &v, &n);
        if (r < 0)
                return r;
        r = -ENOENT;
        /* Newest first: the likeliest match. */
        for (size_t i = n; i-- > 0;) {
                _cleanup_free_ char *text = NULL;
                _cleanup_free_ proc_module *mods = NULL;
                size_t len = 0, n_mods = 0;

                if (!streq(v[i].build_id, build_id) || v[i].text_addr != src->text_addr ||
                    v[i].n_modules != src->n_mods || (want_kcore && !v[i].has_kcore))
                        continue;
                if (read_snapshot_file(cfd, v[i].build_id, v[i].name, "modules", SNAPSHOT_MODULES_MAX_BYTES, &text,
                                       &len) < 0 ||
                    parse_modules(text, len, &mods, &n_mods) < 0)
                        continue;
                if (!same_modules(mods, n_mods, src->mods, src->n_mods))
                        continue;
                *ret = v[i];
                v[i].path = NULL;
                r = 0;
                break;
        }
        snapshot_infos_free(v, n);
        return r;
}

static int write_file_at(int dfd, const char *name, const char *data, size_t len) {
        _cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);

        int r;

        if (fd < 0)
                return negative_errno();
        r = write_full_fd(fd, data, len);
        if (r < 0)
                return r;
        if (fchmod(fd, 0400) < 0 || fsync(fd) < 0)
                return negative_errno();
        return 0;
}

/* Copies the code ranges of kcore into dfd/kcore. Returns 0, or a
 * negative errno for a failed copy; *ret_missing gets the errno why kcore
 * could not be opened (then there is nothing to copy). */
static int copy_kcore(const char *root, int dfd, const source *src, int *ret_missing, kcore_copy_info *ret_info) {
        _cleanup_free_ char *path = path_join(root, "proc/kcore");
        _cleanup_close_ int in = -1, out = -1;
        kcore_want want;
        int r;

        if (!path)
                return -ENOMEM;
        in = open(path, O_RDONLY | O_CLOEXEC);
        if (in < 0) {
                *ret_missing = errno;
                return 0;
        }
        r = kcore_want_from_text(src->kallsyms, src->kallsyms_len, src->modules, src->modules_len, &want);
        if (r < 0)
                return r;
        out = openat(dfd, "kcore", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
        if (out < 0)
                return negative_errno();
        r = kcore_copy(in, out, &want, ret_info);
        if (r < 0)
                return r;
        if (fchmod(out, 0400) < 0 || fsync(out) < 0)
                return negative_errno();
        return 0;
}

static bool source_unchanged(const char *root, const source *src) {
        source now = {};
        bool same;

        if (source_read_modules(root, &now) < 0 || source_read_kallsyms(root, &now) < 0) {
                source_done(&now);
                return false;
        }
        same = now.modules_len == src->modules_len && memcmp(now.modules, src->modules, src->modules_len) == 0 &&
               snapshot_kallsyms_same_code(now.kallsyms, now.kallsyms_len, src->kallsyms, src->kallsyms_len);
        source_done(&now);
        return same;
}

/* Renames the finished directory tfd/work (wfd) to its name under
 * kfd/build_id, whose path is bdir. */
static int publish(int tfd, const char *work, int wfd, int kfd, const char *build_id, const char *bdir, uint64_t now_ns,
                   char ret_name[static SNAPSHOT_NAME_LEN + 1], char **ret_path) {
        _cleanup_close_ int bfd = -1;
        struct stat st;
        int r;

        bfd = make_dir_at(kfd, build_id, 0755);
        if (bfd < 0)
                return bfd;
        /* It was made 0700; give it the mode its parent got (perf makes
         * 0755 directories, less what the umask takes). */
        if (fstat(bfd, &st) < 0 || fchmod(wfd, st.st_mode & 0777) < 0)
                return negative_errno();
        for (unsigned i = 0; i < SNAPSHOT_NAME_TRIES; i++) {
                char name[SNAPSHOT_NAME_LEN + 1];

                r = snapshot_name_from_time(now_ns + i * HUNDREDTH_NS, name);
                if (r < 0)
                        return r;
                if (renameat2(tfd, work, bfd, name, RENAME_NOREPLACE) < 0) {
                        if (errno == EEXIST)
                                continue;
                        if (errno != EINVAL)
                                return negative_errno();
                        /* File systems without rename flags (9p, NFS):
                         * claim the name with an empty directory, then
                         * rename over it, which replaces it atomically. */
                        if (mkdirat(bfd, name, 0700) < 0) {
                                if (errno == EEXIST)
                                        continue;
                                return negative_errno();
                        }
                        if (renameat(tfd, work, bfd, name) < 0) {
                                r = negative_errno();
                                (void) unlinkat(bfd, name, AT_REMOVEDIR);
                                return r;
                        }
                }
                (void) fsync(bfd);
                memcpy(ret_name, name, sizeof name);
                *ret_path = path_join(bdir, name);
                return *ret_path ? 0 : -ENOMEM;
        }
        return -EEXIST;
}

/* A new, empty directory tfd/snapshot-NNNNNNNN (0700), its name in
 * work. */
static int make_work_dir(int tfd, char *work, size_t size) {
        for (unsigned i = 0; i < 100; i++) {
                snprintf(work, size, "snapshot-%08lx",
                         (unsigned long) ((clock_ns(CLOCK_MONOTONIC) ^ ((uint64_t) getpid() << 16)) + i) & 0xffffffffUL);
                if (mkdirat(tfd, work, 0700) >= 0)
                        return 0;
                if (errno != EEXIST)
                        return negative_errno();
        }
        return -EEXIST;
}

static int take(const char *root, const char *cache_dir, unsigned max_attempts, uint64_t now_ns,
                snapshot_take_result *ret, const char **what) {
        _cleanup_free_ char *top = NULL, *bdir = NULL;
        _cleanup_close_ int cfd = -1, tfd = -1, kfd = -1;
        char build_id[BUILD_ID_HEX_MAX];
        snapshot_take_result res = {};
        int r;

        if (max_attempts == 0)
                max_attempts = 1;
        *what = "sys/kernel/notes";
        r = notes_kernel_build_id(root, build_id);
        if (r < 0)
                return r;
        *what = NULL;           /* the cache directory */
        top = path_join(cache_dir, SNAPSHOT_KCORE_DIR);
        bdir = top ? path_join(top, build_id) : NULL;
        if (!bdir)
                return -ENOMEM;
        cfd = snapshot_cache_open(cache_dir, true);
        if (cfd < 0)
                return cfd;
        tfd = make_dir_at(cfd, SNAPSHOT_TMP_DIR, 0700);
        if (tfd < 0)
                return tfd;
        kfd = make_dir_at(cfd, SNAPSHOT_KCORE_DIR, 0755);
        if (kfd < 0)
                return kfd;

        for (unsigned attempt = 0; attempt < max_attempts; attempt++) {
                _cleanup_free_ char *kcore_path = path_join(root, "proc/kcore");
                char work[32];
                _cleanup_close_ int wfd = -1;
                kcore_copy_info ki = {};
                source src = {};
                int missing = 0;

                if (!kcore_path)
                        return -ENOMEM;
                *what = "proc/kallsyms or proc/modules";
                r = source_read(root, &src);
                if (r < 0)
                        return r;
                *what = NULL;

                /* Reusable only if it has a kcore whenever one can be had now. */
                res.kcore_error = access(kcore_path, R_OK) < 0 ? errno : 0;
                r = find_reusable(cfd, cache_dir, build_id, &src, res.kcore_error == 0, &res.info);
                if (r >= 0) {
                        source_done(&src);
                        res.reused = true;
                        res.attempts = attempt;
                        *ret = res;
                        return 0;
                }
                /* A new one: its kallsyms, read whole. */
                *what = "proc/kallsyms";
                r = source_read_kallsyms(root, &src);
                if (r < 0) {
                        source_done(&src);
                        return r;
                }
                *what = NULL;

                r = make_work_dir(tfd, work, sizeof work);
                if (r < 0) {
                        source_done(&src);
                        return r;
                }
                wfd = open_dir_at(tfd, work);
                r = wfd < 0 ? wfd : 0;
                if (r >= 0)
                        r = write_file_at(wfd, "kallsyms", src.kallsyms, src.kallsyms_len);
                if (r >= 0)
                        r = write_file_at(wfd, "modules", src.modules, src.modules_len);
                if (r >= 0) {
                        *what = "proc/kcore";
                        r = copy_kcore(root, wfd, &src, &missing, &ki);
                        if (r >= 0)
                                *what = NULL;
                }
                if (r >= 0 && fsync(wfd) < 0)
                        r = negative_errno();
                res.attempts = attempt + 1;
                if (r >= 0 && !source_unchanged(root, &src)) {
                        log_debug("The kernel's layout changed while it was copied (attempt %u).", attempt + 1);
                        *what = "proc/modules";
                        r = -EAGAIN;
                }
                if (r >= 0) {
                        res.kcore_error = missing;
                        res.kcore_bytes = ki.bytes_copied;
                        res.kcore_segments = ki.n_segments;
                        r = publish(tfd, work, wfd, kfd, build_id, bdir, now_ns, res.info.name, &res.info.path);
                }
                if (r < 0) {
                        (void) remove_tree_at(tfd, work, 0);
                        source_done(&src);
                        if (r == -EAGAIN)
                                continue;
                        return r;
                }
                /* What a listing would read back from the files just written. */
                strcpy(res.info.build_id, build_id);
                (void) snapshot_time_from_name(res.info.name, &res.info.time_ns);
                res.info.text_addr = src.text_addr;
                res.info.n_modules = src.n_mods;
                res.info.has_kcore = missing == 0;
                res.info.size_bytes = src.kallsyms_len + src.modules_len + ki.file_size;
                source_done(&src);
                *ret = res;
                return 0;
        }
        return -EAGAIN;
}

int snapshot_take(const char *root, const char *cache_dir, unsigned max_attempts, uint64_t now_ns,
                  snapshot_take_result *ret, const char **ret_failed) {
        const char *what = NULL;
        int r;

        r = take(root, cache_dir, max_attempts, now_ns, ret, &what);
        if (r < 0 && ret_failed)
                *ret_failed = what;
        return r;
}
