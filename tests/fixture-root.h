/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* A synthetic root (proc/ and sys/ in the kernel's own formats) built
 * from the 6.1 capture in tests/fixtures/kernel-6.1-brd, for the tests
 * and benchmarks that run the daemon's objects without root. */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define FIXTURE_BRD TEST_DATA_DIR "/kernel-6.1-brd"

/* Runs a shell command; 0 if it exited 0. */
__attribute__((format(printf, 1, 2)))
static inline int fixture_sh(const char *fmt, ...) {
        char cmd[1024];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t) n >= sizeof cmd)
                return -ENAMETOOLONG;
        return system(cmd) == 0 ? 0 : -EIO;
}

/* Writes text to DIR/REL, making its directories; 0 on success. */
static inline int fixture_put(const char *dir, const char *rel, const char *text) {
        char path[512];
        FILE *f;
        int r;

        if ((size_t) snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path)
                return -ENAMETOOLONG;
        r = fixture_sh("mkdir -p \"$(dirname '%s')\"", path);
        if (r < 0)
                return r;
        f = fopen(path, "we");
        if (!f)
                return -errno;
        r = fputs(text, f) < 0 ? -EIO : 0;
        if (fclose(f) != 0 && r == 0)
                r = -EIO;
        return r;
}

/* Makes DIR/proc/kallsyms (the capture with brd loaded), DIR/proc/modules
 * (proc/modules.MODULES of the capture: "loaded" or "unloaded"), the
 * release and boot_uuid under DIR/proc/sys/kernel, DIR/sys/kernel/notes
 * and, if sections, DIR/sys/module (brd's section map). */
static inline int fixture_root_brd(const char *dir, const char *modules, bool sections, const char *boot_uuid) {
        if (fixture_sh("mkdir -p %s/proc/sys/kernel/random %s/sys/kernel", dir, dir) < 0 ||
            fixture_sh("gzip -dc " FIXTURE_BRD "/proc/kallsyms.loaded.gz > %s/proc/kallsyms", dir) < 0 ||
            fixture_sh("cp " FIXTURE_BRD "/proc/modules.%s %s/proc/modules", modules, dir) < 0 ||
            fixture_sh("cp " FIXTURE_BRD "/sys/kernel/notes %s/sys/kernel/", dir) < 0 ||
            fixture_sh("cp " FIXTURE_BRD "/release %s/proc/sys/kernel/osrelease", dir) < 0 ||
            fixture_sh("echo %s > %s/proc/sys/kernel/random/boot_id", boot_uuid, dir) < 0)
                return -EIO;
        if (sections && fixture_sh("cp -r " FIXTURE_BRD "/sys/module %s/sys/", dir) < 0)
                return -EIO;
        return 0;
}
