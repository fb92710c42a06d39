/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Reads a whole file into a NUL-terminated buffer. Works on /proc and /sys
 * files, which report st_size 0, by reading until EOF. Fails with -EFBIG if
 * the file is larger than max_bytes. */
int read_full_file(const char *path, size_t max_bytes, char **ret, size_t *ret_size);

/* Same, with the path relative to root ("/" or a test's synthetic root). */
int read_full_file_at(const char *root, const char *relpath, size_t max_bytes, char **ret, size_t *ret_size);

/* Joins root and a relative path ("proc/kallsyms") into a newly allocated path. */
char *path_join(const char *root, const char *relpath);

/* Creates the directory that holds path (one level, not its parents);
 * an existing directory is fine. */
int mkdir_parent(const char *path, mode_t mode);
