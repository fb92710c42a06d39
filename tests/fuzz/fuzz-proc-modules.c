/* SPDX-License-Identifier: GPL-2.0-or-later */
/* proc_modules_parse() on arbitrary text; every line is either a module or
 * counted as skipped. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/modules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        proc_module *mods = NULL;
        size_t n = 0, skipped = 0, lines = 0;
        int r;

        r = proc_modules_parse((const char *) data, size, &mods, &n, &skipped);
        if (r < 0) {
                if (r != -ENOMEM)
                        abort();
                return 0;
        }

        /* Non-empty lines: each gives a module or a skip. */
        for (size_t i = 0; i < size; ) {
                const uint8_t *nl = memchr(data + i, '\n', size - i);
                size_t end = nl ? (size_t) (nl - data) : size;

                if (end > i)
                        lines++;
                i = end + 1;
        }
        if (n + skipped != lines)
                abort();
        if ((n == 0) != (mods == NULL))
                abort();
        for (size_t i = 0; i < n; i++) {
                if (!module_name_is_valid(mods[i].name))
                        abort();
                if (mods[i].state > MODULE_STATE_OTHER)
                        abort();
        }
        free(mods);
        return 0;
}
