/* SPDX-License-Identifier: GPL-2.0-or-later */
/* perfsnapctl: asks perfsnapd over its unix socket (doc/protocol.md) and
 * prints the answer. This file dispatches to the commands: cmd-query.c,
 * cmd-status.c, cmd-layout.c (modules, ksyms, events, rescan, snapshot),
 * cmd-cache.c; client.c holds what they share. */

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "build-config.h"
#include "perfsnapctl.h"
#include "wire/protocol.h"

static void help_main(void) {
        printf("Usage: perfsnapctl [--socket PATH] COMMAND [OPTIONS]\n"
               "\n"
               "Ask the perfsnapd profiler daemon where the machine spent its CPU time.\n"
               "\n"
               "Commands:\n"
               "  query    show the most sampled symbols in a time range\n"
               "  export   write a time range as pprof, an SVG or HTML flame graph, or folded stacks\n"
               "  diff     compare two time ranges: which functions' shares changed most\n"
               "  units    show the CPU time of each systemd unit (or cgroup) in a time range\n"
               "  status   show the daemon's state\n"
               "  modules  show kernel modules loaded and unloaded, with their section maps\n"
               "  ksyms    show BPF programs and other dynamic kernel code registered and gone\n"
               "  events   show the journal of kernel code layout changes\n"
               "  rescan   compare /proc/modules and kallsyms with what is tracked now (root)\n"
               "  snapshot snapshot the kernel's code into the build-id cache now (root)\n"
               "  cache    list or prune the kcore snapshots (cache list, cache prune)\n"
               "\n"
               "Options:\n"
               "      --socket PATH  connect to PATH (default: $PERFSNAPD_SOCKET, else\n"
               "                     %s)\n"
               "  -h, --help         show this help\n"
               "      --version      show the version\n"
               "\n"
               "Run 'perfsnapctl COMMAND --help' for the options of a command.\n"
               "Errors exit with status 1.\n",
               DEFAULT_SOCKET);
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket",  required_argument, NULL, ARG_SOCKET },
                { "help",    no_argument,       NULL, 'h' },
                { "version", no_argument,       NULL, ARG_VERSION },
                {}
        };
        int c;

        opterr = 0;
        /* '+': stop at the command; its options are parsed by the command. */
        while ((c = getopt_long(argc, argv, "+:h", options, NULL)) >= 0)
                switch (c) {
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case 'h':
                        help_main();
                        return finish_output();
                case ARG_VERSION:
                        printf("perfsnapctl %s (protocol %d)\n", PACKAGE_VERSION, PERFSNAP_PROTOCOL_VERSION);
                        return finish_output();
                default:
                        if (c == ':')
                                return print_error("option '%s' needs an argument (see 'perfsnapctl --help')", argv[optind - 1]);
                        return print_error("unknown option '%s' (see 'perfsnapctl --help')", argv[optind - 1]);
                }

        if (optind >= argc)
                return print_error("no command given (see 'perfsnapctl --help')");

        argc -= optind;
        argv += optind;
        if (strcmp(argv[0], "query") == 0)
                return cmd_query(argc, argv);
        if (strcmp(argv[0], "export") == 0)
                return cmd_export(argc, argv);
        if (strcmp(argv[0], "diff") == 0)
                return cmd_diff(argc, argv);
        if (strcmp(argv[0], "units") == 0)
                return cmd_units(argc, argv);
        if (strcmp(argv[0], "status") == 0)
                return cmd_status(argc, argv);
        if (strcmp(argv[0], "modules") == 0)
                return cmd_modules(argc, argv);
        if (strcmp(argv[0], "ksyms") == 0)
                return cmd_ksyms(argc, argv);
        if (strcmp(argv[0], "events") == 0)
                return cmd_events(argc, argv);
        if (strcmp(argv[0], "rescan") == 0)
                return cmd_rescan(argc, argv);
        if (streq(argv[0], "snapshot"))
                return cmd_snapshot(argc, argv);
        if (streq(argv[0], "cache"))
                return cmd_cache(argc, argv);
        return print_error("unknown command '%s' (see 'perfsnapctl --help')", argv[0]);
}
