/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Arbitrary strings as time, duration and size expressions. A parsed
 * duration must format, and what duration_format() prints must parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char buf[DURATION_FORMAT_MAX], tbuf[TIME_FORMAT_MAX];
        uint64_t v, back;
        char *s;

        /* Expressions are short; do not let mktime() dominate the run. */
        if (size > 256)
                return 0;
        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;

        if (time_parse(s, UINT64_C(1795269600000000000), &v) >= 0)
                (void) time_format_local(v, tbuf, sizeof(tbuf));
        if (duration_parse(s, &v) >= 0) {
                if (!duration_format(v, buf, sizeof(buf)))
                        abort();
                if (duration_parse(buf, &back) < 0 || back > v)
                        abort();
        }
        (void) size_parse(s, &v);
        free(s);
        return 0;
}
