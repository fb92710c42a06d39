/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Whole-file reads for /proc and /sys (fileio.h). */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"

int read_full_file(const char *path, size_t max_bytes, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -1;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        return read_full_fd(fd, max_bytes, ret, ret_size);
}

int read_full_fd(int fd, size_t max_bytes, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;

        for (;;) {
                ssize_t n;

                if (alloc - size < 4096 + 1) {
                        size_t nalloc = alloc ? alloc * 2 : 65536;
                        char *p;

                        if (nalloc > max_bytes + 1)
                                nalloc = max_bytes + 1;
                        if (nalloc <= size + 1) {
                                /* At the limit: fine only if the file ends here. */
                                char probe;
                                n = read(fd, &probe, 1);
                                if (n < 0 && errno == EINTR)
                                        continue;
                                if (n < 0)
                                        return negative_errno();
                                if (n > 0)
                                        return -EFBIG;
                                break;
                        }
                        p = realloc(buf, nalloc);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        alloc = nalloc;
                }

                n = read(fd, buf + size, alloc - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > max_bytes)
                        return -EFBIG;
        }

        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return -ENOMEM;
        }
        buf[size] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}

char *path_join(const char *root, const char *relpath) {
        char *p;
        size_t rl;

        if (!root || !*root)
                root = "/";
        while (*relpath == '/')
                relpath++;
        rl = strlen(root);
        if (asprintf(&p, "%s%s%s", root, rl > 0 && root[rl - 1] == '/' ? "" : "/", relpath) < 0)
                return NULL;
        return p;
}

int read_full_file_at(const char *root, const char *relpath, size_t max_bytes, char **ret, size_t *ret_size) {
        _cleanup_free_ char *p = path_join(root, relpath);

        if (!p)
                return -ENOMEM;
        return read_full_file(p, max_bytes, ret, ret_size);
}

static int check_stat_private(const struct stat *st, const char **ret_why);

int check_dir_private(const char *dir, const char **ret_why) {
        struct stat st;

        if (lstat(dir, &st) < 0)
                return negative_errno();
        if (S_ISLNK(st.st_mode))
                return *ret_why = "it is a symbolic link", -ELOOP;
        return check_stat_private(&st, ret_why);
}

int check_fd_private(int fd, const char **ret_why) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        return check_stat_private(&st, ret_why);
}

static int check_stat_private(const struct stat *st, const char **ret_why) {
        if (!S_ISDIR(st->st_mode))
                return *ret_why = "it is not a directory", -ENOTDIR;
        if (st->st_uid != 0 && st->st_uid != geteuid())
                return *ret_why = "it belongs to another user", -EPERM;
        if (st->st_mode & S_IWOTH)
                return *ret_why = "every user may write to it", -EPERM;
        if ((st->st_mode & S_IWGRP) && st->st_gid != 0)
                return *ret_why = "a group other than root's may write to it", -EPERM;
        return 0;
}

int check_parent_private(const char *path, const char **ret_why) {
        _cleanup_free_ char *dir = strdup(path);
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash)
                return -EINVAL;
        *(slash == dir ? slash + 1 : slash) = 0;
        return check_dir_private(dir, ret_why);
}

int mkdir_parent(const char *path, mode_t mode) {
        _cleanup_free_ char *dir = strdup(path);
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = 0;
        if (mkdir(dir, mode) < 0)
                return errno == EEXIST ? 0 : negative_errno();
        /* The mode asked for, whatever the umask. */
        if (chmod(dir, mode) < 0)
                return negative_errno();
        return 0;
}

int write_full_fd(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

int open_root_dir(const char *root, uint32_t pid) {
        char path[PATH_MAX];
        int fd;

        if (pid > 0)
                snprintf(path, sizeof path, "%s/proc/%" PRIu32 "/root", streq(root, "/") ? "" : root, pid);
        else
                snprintf(path, sizeof path, "%s", root);
        fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif

/* A kernel interface dressed as files, where reading may do something
 * (/proc/kmsg consumes the kernel log): never a binary, debug file or JIT
 * map. A process can mount its own procfs where a mapped file's path
 * leads. */
static bool pseudo_fs(int fd) {
        static const unsigned long types[] = {
                PROC_SUPER_MAGIC, SYSFS_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC,
                CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, BPF_FS_MAGIC, CONFIGFS_MAGIC, PSTOREFS_MAGIC,
                EFIVARFS_MAGIC, DEVPTS_SUPER_MAGIC,
        };
        struct statfs sfs;

        if (fstatfs(fd, &sfs) < 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if ((unsigned long) sfs.f_type == types[i])
                        return true;
        return false;
}

int open_regular_file(int rootfd, const char *path, bool no_symlinks, struct stat *ret_st) {
        _cleanup_close_ int pfd = -1;
        char self[64];
        struct stat st;
        int fd;

        if (rootfd >= 0) {
                struct open_how how = {
                        .flags = O_PATH | O_CLOEXEC,
                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (no_symlinks ? RESOLVE_NO_SYMLINKS : 0),
                };

                pfd = (int) syscall(SYS_openat2, rootfd, path, &how, sizeof how);
                if (pfd < 0 && (errno == ENOSYS || errno == EPERM)) {
                        /* No openat2 (before Linux 5.6, or a seccomp filter
                         * that does not know it, as systemd's returns
                         * ENOSYS): resolved from rootfd as usual, so an
                         * absolute link leads to our root, not rootfd. */
                        while (*path == '/')
                                path++;
                        pfd = openat(rootfd, *path ? path : ".", O_PATH | O_CLOEXEC | (no_symlinks ? O_NOFOLLOW : 0));
                }
        } else
                pfd = openat(AT_FDCWD, path, O_PATH | O_CLOEXEC | (no_symlinks ? O_NOFOLLOW : 0));
        if (pfd < 0)
                return negative_errno();
        if (fstat(pfd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || pseudo_fs(pfd))
                return -EINVAL;
        snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
        fd = open(self, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (ret_st)
                *ret_st = st;
        return fd;
}
