/* SPDX-License-Identifier: GPL-2.0-or-later */
/* sample_block_decode() and dict_block_decode() on arbitrary bytes: an
 * error, or entries that encode and decode again to the same entries;
 * pid_set_has() on them: an error, or a set that holds the greatest pid
 * its header names. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/sample-block.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_full(const void *a, const void *b) {
        return memcmp(a, b, sizeof(block_entry));
}

/* A dictionary block that decodes keeps every rule its encoder checks. */
static void dict_block(dict_kind kind, const uint8_t *data, size_t size) {
        int64_t *v = NULL, *again = NULL;
        uint8_t *enc = NULL;
        size_t n = 0, m = 0, enc_size = 0;
        int r;

        r = dict_block_decode(NULL, kind, data, size, &v, &n);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOMEM)
                        abort();
                return;
        }
        if (dict_block_encode(NULL, kind, v, n, &enc, &enc_size) < 0 ||
            dict_block_decode(NULL, kind, enc, enc_size, &again, &m) < 0 || m != n ||
            memcmp(v, again, n * (1 + dict_columns(kind)) * sizeof *v) != 0)
                abort();
        free(v);
        free(again);
        free(enc);
}

/* The varint at *p (of end), as the codec writes them; false if none. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
                uint8_t b = *(*p)++;

                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/* A set of pids that decodes holds the greatest pid its header names
 * (a set of none holds none). */
static void pid_set(const uint8_t *data, size_t size) {
        const uint8_t *p = data + 1, *end = data + size;
        uint64_t n, max;
        bool has = false;
        int r;

        r = pid_set_has(NULL, data, size, 0, &has);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOMEM)
                        abort();
                return;
        }
        if (!varint(&p, end, &n) || !varint(&p, end, &max) || max > UINT32_MAX)
                abort();
        if (pid_set_has(NULL, data, size, (uint32_t) max, &has) < 0 || has != (n > 0))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        block_entry *v = NULL, *again = NULL;
        uint8_t *enc = NULL;
        size_t n = 0, m = 0, enc_size = 0;
        int r;

        dict_block(DICT_STACKS, data, size);
        dict_block(DICT_FRAMES, data, size);
        pid_set(data, size);
        r = sample_block_decode(NULL, data, size, &v, &n);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOMEM)
                        abort();
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (v[i].count == 0 || v[i].kind >= _SAMPLE_KIND_MAX)
                        abort();
        if (sample_block_encode(NULL, v, n, true, &enc, &enc_size) < 0 ||
            sample_block_decode(NULL, enc, enc_size, &again, &m) < 0 || m != n)
                abort();
        if (n > 0) {
                qsort(v, n, sizeof *v, cmp_full);
                qsort(again, m, sizeof *again, cmp_full);
                if (memcmp(v, again, n * sizeof *v) != 0)
                        abort();
        }
        free(v);
        free(again);
        free(enc);
        return 0;
}
