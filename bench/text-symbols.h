/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The text symbols (types t and T) of a kallsyms file, in file order, for
 * the benchmarks that build call stacks from real kernel functions. Lines
 * go through kallsyms_line_parse(), like every reader of kallsyms text. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kernel/kallsyms.h"

/* Calls cb for each text symbol of PATH until it returns false. 0, or a
 * negative errno if PATH cannot be opened. */
static inline int for_each_text_symbol(const char *path, bool (*cb)(const kallsyms_line *l, void *userdata),
                                       void *userdata) {
        char line[512];
        FILE *f = fopen(path, "re");

        if (!f)
                return -errno;
        while (fgets(line, sizeof line, f)) {
                kallsyms_line l;

                if (!kallsyms_line_parse(line, strcspn(line, "\n"), &l) || (l.type != 't' && l.type != 'T'))
                        continue;
                if (!cb(&l, userdata))
                        break;
        }
        fclose(f);
        return 0;
}
