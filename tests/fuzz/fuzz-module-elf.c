/* SPDX-License-Identifier: GPL-2.0-or-later */
/* module_elf_apply() on arbitrary files, with a fixed section list as
 * sysfs would give it. The input goes through a memfd because the
 * function takes a path. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernel/modules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The build-id of tests/unit/data/fake-module.c, whose object seeds the
 * corpus. */
#define FAKE_BUILD_ID "00112233445566778899aabbccddeeff01234567"

static const char *const section_names[] = {
        ".text", ".init.text", ".exit.text", ".rodata", ".data", ".bss",
        ".note.gnu.build-id", ".symtab", ".strtab", ".not-in-the-file",
};

static void sections_init(module_section *secs) {
        for (size_t i = 0; i < sizeof(section_names) / sizeof(section_names[0]); i++)
                secs[i] = (module_section) {
                        .name = (char *) section_names[i],
                        .addr = UINT64_C(0xffffffffc0000000) + i * 0x10000,
                        .len_source = SECTION_LEN_UNKNOWN,
                };
}

static void check(const char *path, const char *build_id, bool want_syms) {
        module_section secs[sizeof(section_names) / sizeof(section_names[0])], before[sizeof(secs) / sizeof(secs[0])];
        const size_t n = sizeof(secs) / sizeof(secs[0]);
        module_symbol *syms = NULL;
        size_t nsyms = 0;
        int r;

        sections_init(secs);
        memcpy(before, secs, sizeof(secs));
        r = module_elf_apply(path, build_id, secs, n, want_syms ? &syms : NULL, want_syms ? &nsyms : NULL);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ESTALE && r != -ENOMEM)
                        abort();
                /* A failure changes nothing. */
                if (memcmp(secs, before, sizeof(secs)) != 0 || syms)
                        abort();
                return;
        }

        for (size_t i = 0; i < n; i++) {
                if (secs[i].name != before[i].name || secs[i].addr != before[i].addr)
                        abort();
                if (secs[i].len_source != SECTION_LEN_ELF &&
                    memcmp(&secs[i], &before[i], sizeof(secs[i])) != 0)
                        abort();
        }

        for (size_t i = 0; i < nsyms; i++) {
                bool inside = false;

                if (!syms[i].name || !syms[i].name[0])
                        abort();
                if (i > 0 && syms[i - 1].addr > syms[i].addr)
                        abort();
                /* Each symbol lies within a section the file has. */
                for (size_t j = 0; j < n && !inside; j++)
                        inside = secs[j].len_source == SECTION_LEN_ELF &&
                                syms[i].addr >= secs[j].addr &&
                                syms[i].addr - secs[j].addr <= secs[j].len &&
                                syms[i].size <= secs[j].len - (syms[i].addr - secs[j].addr);
                if (!inside)
                        abort();
        }
        module_symbols_free(syms, nsyms);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static int fd = -1;
        char path[64];

        if (fd < 0) {
                fd = memfd_create("fuzz-module-elf", MFD_CLOEXEC);
                if (fd < 0)
                        abort();
        }
        if (ftruncate(fd, 0) < 0 || (size > 0 && pwrite(fd, data, size, 0) != (ssize_t) size))
                abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

        check(path, "", true);
        check(path, FAKE_BUILD_ID, false);
        check(path, FAKE_BUILD_ID, true);
        return 0;
}
