/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A symbolized stack frame: what the daemon's symbolizer makes of one
 * sampled address and hands to the store to intern. */

#include <stddef.h>
#include <stdint.h>

typedef enum frame_kind {
        FRAME_KERNEL = 1, /* resolved (or not) against the kernel layout */
        FRAME_USER = 2,   /* user address; never given a kernel symbol */
} frame_kind;

#define MODULE_KERNEL "[kernel.kallsyms]"

typedef struct frame {
        frame_kind kind;
        uint64_t addr;          /* runtime address as sampled */
        /* kernel frames */
        const char *symbol;     /* NULL if no symbol covers addr */
        uint64_t offset;        /* addr - symbol start; for user frames: file offset (pgoff + addr - map start) */
        /* kernel: "[kernel.kallsyms]" or "[name]" (NULL if unresolved);
         * user: mapping path from mmap2 or /proc/PID/maps (NULL if unknown) */
        const char *module;
        const char *build_id;   /* hex, or NULL if unknown */
} frame;
