/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What every libelf reader of the project needs: the library set up once
 * per process, and the bounds check of an offset and size read from a
 * file. */

#include <stdbool.h>
#include <stdint.h>

/* elf_version(EV_CURRENT), once for all threads: false if libelf cannot
 * work with this ELF version. */
bool elf_library_ready(void);

/* Whether [offset, offset + size) lies within [0, limit). */
static inline bool elf_range_fits(uint64_t offset, uint64_t size, uint64_t limit) {
        return offset <= limit && size <= limit - offset;
}
