/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Reading whole files (from /proc and /sys too), and writing them. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Reads a whole file into a NUL-terminated buffer. Works on /proc and /sys
 * files, which report st_size 0, by reading until EOF. Fails with -EFBIG if
 * the file is larger than max_bytes. */
int read_full_file(const char *path, size_t max_bytes, char **ret, size_t *ret_size);
/* The same from an open file descriptor, read from where it is. */
int read_full_fd(int fd, size_t max_bytes, char **ret, size_t *ret_size);

/* The directory a process's paths are resolved in, for open_regular_file():
 * ROOT/proc/PID/root (its own root directory: a container's; following it
 * takes ptrace access to the process), or ROOT itself for pid 0. An O_PATH
 * descriptor, or -errno. */
int open_root_dir(const char *root, uint32_t pid);

/* Opens a file for reading only if it is a regular file, without opening
 * anything else for real (no device, FIFO or terminal is ever opened:
 * the path is first opened O_PATH, checked with fstat, then reopened
 * through /proc/self/fd). With rootfd >= 0 the path is resolved as a
 * process rooted at rootfd would (openat2 RESOLVE_IN_ROOT: absolute
 * links and ".." stay inside it; no magic links), e.g. rootfd
 * /proc/PID/root for a container's file; with AT_FDCWD as usual. Without
 * openat2 (ENOSYS or EPERM: an old kernel, or a seccomp filter such as
 * systemd's that does not know it) it is resolved from rootfd as usual,
 * where an absolute link leads to our own root.
 * no_symlinks: no symbolic link anywhere in the path. *ret_st (may be
 * NULL) gets its stat. -EBADF... from the calls, -EINVAL for a file that
 * is not regular or is on a kernel pseudo filesystem (procfs, sysfs,
 * debugfs, tracefs, cgroupfs and the like, where a read can have effects:
 * /proc/kmsg). */
int open_regular_file(int rootfd, const char *path, bool no_symlinks, struct stat *ret_st);

/* Writes all of data to fd, again after EINTR and short writes. */
int write_full_fd(int fd, const void *data, size_t size);

/* Same, with the path relative to root ("/" or a test's synthetic root). */
int read_full_file_at(const char *root, const char *relpath, size_t max_bytes, char **ret, size_t *ret_size);

/* Joins root and a relative path ("proc/kallsyms") into a newly allocated path. */
char *path_join(const char *root, const char *relpath);

/* Creates the directory that holds path (one level, not its parents)
 * with exactly mode, whatever the umask; an existing directory is left
 * as it is. */
int mkdir_parent(const char *path, mode_t mode);

/* 0 if dir is a directory (not a symbolic link to one) only its owner can
 * change: owned by root or by us, and writable neither by others nor by a
 * group other than root's. Else -EPERM, -ELOOP or -ENOTDIR with *ret_why
 * saying what is wrong (or -errno without it if it cannot be looked at).
 * Somebody else who can write there can put links where the daemon's
 * files go. */
int check_dir_private(const char *dir, const char **ret_why);
/* The same for an open directory. */
int check_fd_private(int fd, const char **ret_why);
/* The same for the directory that holds path. */
int check_parent_private(const char *path, const char **ret_why);
