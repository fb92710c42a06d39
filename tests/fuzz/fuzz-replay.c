/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Replays fuzz inputs (files or directories of files) through
 * LLVMFuzzerTestOneInput when no fuzzing engine is linked, so each corpus
 * runs as a meson test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
        char *buf = NULL;
        size_t size = 0;
        int r = read_full_file(path, 64 * 1024 * 1024, &buf, &size);

        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return 1;
        }
        /* Copy to an exactly sized allocation so ASan sees reads past the end. */
        uint8_t *exact = malloc(size ? size : 1);
        if (!exact)
                abort();
        memcpy(exact, buf, size);
        free(buf);
        LLVMFuzzerTestOneInput(exact, size);
        free(exact);
        return 0;
}

int main(int argc, char **argv) {
        size_t n = 0;
        int failed = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        failed |= replay_file(argv[i]);
                        n++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d) {
                        perror(argv[i]);
                        return 1;
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        char *p;
                        if (de->d_name[0] == '.')
                                continue;
                        if (asprintf(&p, "%s/%s", argv[i], de->d_name) < 0)
                                abort();
                        failed |= replay_file(p);
                        free(p);
                        n++;
                }
                closedir(d);
        }
        fprintf(stderr, "replayed %zu inputs\n", n);
        if (n == 0)
                return 77;
        return failed;
}
