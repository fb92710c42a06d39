/* SPDX-License-Identifier: GPL-2.0-or-later */
/* kallsyms_parse() on arbitrary text, then lookups that must agree with
 * the table's own invariants. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/kallsyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lookup(const kallsyms *k, uint64_t addr) {
        ksym s;

        if (kallsyms_lookup(k, addr, &s) < 0)
                return;
        if (s.addr > addr || addr >= s.end || !s.name || strlen(s.name) == 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        kallsyms *k = NULL;
        uint64_t a, prev = 0;
        ksym s;

        if (kallsyms_parse((const char *) data, size, &k) < 0)
                return 0;

        for (size_t i = 0; i < kallsyms_count(k); i++) {
                /* Ends saturate: only a symbol at the very last address
                 * has an empty range. */
                if (kallsyms_get(k, i, &s) < 0 || s.addr < prev ||
                    (s.end <= s.addr && s.addr != UINT64_MAX))
                        abort();
                prev = s.addr;
                if (i < 256) {
                        check_lookup(k, s.addr);
                        check_lookup(k, s.addr - 1);
                        check_lookup(k, s.end - 1);
                        check_lookup(k, s.end);
                        /* The exact start always resolves to a symbol at that address. */
                        if (s.addr != UINT64_MAX && kallsyms_lookup(k, s.addr, &s) < 0)
                                abort();
                }
        }
        if (size >= 8) {
                memcpy(&a, data, sizeof(a));
                check_lookup(k, a);
        }
        check_lookup(k, 0);
        check_lookup(k, UINT64_MAX);
        (void) kallsyms_text_addr(k, &a);
        (void) kallsyms_find(k, "brd_submit_bio", &a);
        (void) kallsyms_memory_bytes(k);
        kallsyms_free(k);
        return 0;
}
