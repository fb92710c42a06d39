/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapd's command line: options, --check-db, and running the daemon
 * object (daemon.c). */
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include "build-config.h"
#include "config.h"
#include "daemon.h"
#include "log.h"
#include "macro.h"
#include "store/store.h"
#include "usymbols.h"

static void help(void) {
        printf("Usage: perfsnapd [OPTIONS]\n"
               "\n"
               "Always-on system-wide kernel profiler: samples every online CPU with call\n"
               "chains, symbolizes kernel frames against the layout of the moment and stores\n"
               "the samples in an sqlite database that perfsnapctl(1) queries.\n"
               "\n"
               "  -c, --config FILE   read FILE instead of %s\n"
               "  -f, --foreground    accepted for compatibility; perfsnapd never forks\n"
               "                      (systemd runs it with Type=notify)\n"
               "      --check-config  parse and validate the configuration, print the\n"
               "                      effective values and exit (1 if invalid)\n"
               "      --check-db      check the configured database (sqlite's\n"
               "                      integrity_check, and that it is perfsnapd's), print\n"
               "                      the result and exit (0 intact or absent, 1 not);\n"
               "                      run it with the daemon stopped or running\n"
               "      --root DIR      read proc/, sys/ and lib/modules/ below DIR instead\n"
               "                      of / (tests); overrides the root key of the\n"
               "                      configuration\n"
               "  -h, --help          show this help\n"
               "  -V, --version       show the version\n"
               "\n"
               "Signals: SIGTERM/SIGINT flush and stop, SIGHUP reloads the configuration.\n"
               "See perfsnapd(8) and perfsnapd.conf(5).\n",
               DEFAULT_CONFIG_PATH);
}

int main(int argc, char **argv) {
        enum { ARG_CHECK_CONFIG = 0x100, ARG_ROOT, ARG_CHECK_DB };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "foreground", no_argument, NULL, 'f' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "check-db", no_argument, NULL, ARG_CHECK_DB },
                { "root", required_argument, NULL, ARG_ROOT },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        const char *config_path = DEFAULT_CONFIG_PATH, *root = NULL;
        bool check = false, check_db = false, explicit_config = false;
        _cleanup_free_ char *error = NULL;
        daemon_ctx *d = NULL;
        config cfg;
        int c, r;

        log_open("perfsnapd");
        /* Blocks of 1 MiB and more in mappings of their own, whatever
         * was freed before: glibc raises this threshold to the size of a
         * freed mapped block, and the aggregates, caches' tables and
         * dictionaries that grow and are given back (megabytes each)
         * would stay resident in the heap after they are freed. Not
         * lower: the blocks of a few hundred KiB that the write path
         * takes and frees every second would cost a mapping and its
         * page faults each (bench/RESULTS.md). */
        mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
        /* Private from the first file on (daemon_start() sets it again). */
        umask(0077);

        while ((c = getopt_long(argc, argv, "c:fhV", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        config_path = optarg;
                        explicit_config = true;
                        break;
                case 'f':
                        break;
                case ARG_CHECK_CONFIG:
                        check = true;
                        break;
                case ARG_CHECK_DB:
                        check_db = true;
                        break;
                case ARG_ROOT:
                        root = optarg;
                        break;
                case 'h':
                        help();
                        return 0;
                case 'V':
                        printf("perfsnapd %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        fprintf(stderr, "Try 'perfsnapd --help'.\n");
                        return 1;
                }
        if (optind < argc) {
                fprintf(stderr, "perfsnapd: unexpected argument '%s'. Try 'perfsnapd --help'.\n", argv[optind]);
                return 1;
        }

        config_init(&cfg);
        r = config_load(&cfg, config_path, &error);
        if (r == -ENOENT && !explicit_config) {
                /* No /etc file: the built-in defaults are the documented ones. */
                free(error);
                error = NULL;
                r = 0;
        }
        if (r >= 0 && root) {
                free(cfg.root);
                cfg.root = strdup(root);
        }
        if (r < 0) {
                fprintf(stderr, "perfsnapd: invalid configuration: %s\n", error ?: strerror(-r));
                config_done(&cfg);
                return 1;
        }

        if (check) {
                _cleanup_free_ char *text = config_format(&cfg);
                printf("# effective configuration (from %s)\n%s", config_path, text ?: "");
                config_done(&cfg);
                return text ? 0 : 1;
        }

        if (check_db) {
                _cleanup_free_ char *why = NULL;

                r = store_verify(cfg.database, STORE_CHECK_FULL, &why);
                if (r >= 0)
                        printf("%s: ok\n", cfg.database);
                else if (r == -EPROTO)
                        printf("%s: not a perfsnapd database: %s\n", cfg.database, why ?: "?");
                else if (r == -EBADMSG)
                        printf("%s: damaged: %s\n", cfg.database, why ?: strerror(-r));
                else
                        printf("%s: cannot check: %s\n", cfg.database, strerror(-r));
                config_done(&cfg);
                return r >= 0 ? 0 : 1;
        }

        log_set_max_level(cfg.log_level);
        /* Before any thread exists: libdebuginfod reads its environment. */
        r = usymbols_setup_env(&cfg);
        if (r < 0) {
                log_error_errno(r, "Failed to set up debuginfod: %m");
                goto finish;
        }

        r = daemon_new(&cfg, config_path, &d);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the daemon: %m");
                goto finish;
        }
        r = daemon_start(d);
        if (r < 0)
                goto finish;
        r = daemon_run(d);

finish:
        if (r < 0)
                (void) sd_notifyf(0, "STATUS=Failed: %s\nERRNO=%d", strerror(-r), -r);
        daemon_free(d);
        config_done(&cfg);
        return r < 0 ? 1 : 0;
}
