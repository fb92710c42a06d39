/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = malloc(size + 1), *error = NULL;
        config c;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        config_init(&c);
        if (config_parse(&c, text, "fuzz", &error) >= 0) {
                /* What parses must format and parse back to the same text. */
                _cleanup_free_ char *a = config_format(&c), *b = NULL;
                config d;
                config_init(&d);
                if (!a || config_parse(&d, a, "formatted", NULL) < 0)
                        abort();
                b = config_format(&d);
                if (!b || strcmp(a, b) != 0)
                        abort();
                config_done(&d);
        }
        config_done(&c);
        return 0;
}
