/* SPDX-License-Identifier: GPL-2.0-or-later */
/* notes_find_build_id() on arbitrary bytes, at an odd alignment too. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/notes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size) {
        char hex[BUILD_ID_HEX_MAX];
        size_t l;
        int r;

        memset(hex, 'x', sizeof(hex));
        r = notes_find_build_id(data, size, hex);
        if (r < 0) {
                if (r != -ENOENT && r != -EBADMSG)
                        abort();
                return;
        }
        l = strnlen(hex, sizeof(hex));
        if (l == 0 || l >= sizeof(hex) || l % 2 != 0 || strspn(hex, "0123456789abcdef") != l)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *copy;

        check(data, size);

        copy = malloc(size + 1);
        if (!copy)
                return 0;
        memcpy(copy + 1, data, size);
        check(copy + 1, size);
        free(copy);
        return 0;
}
