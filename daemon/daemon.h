/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* The daemon object that main.c runs and test-daemon drives in-process. */

#include <stdbool.h>

#include "config.h"

typedef struct daemon_ctx daemon_ctx;

/* Takes a copy of the configuration; config_path is re-read on SIGHUP. */
int daemon_new(const config *c, const char *config_path, daemon_ctx **ret);
daemon_ctx *daemon_free(daemon_ctx *d);

/* Opens the database, loads the kernel layout, opens the perf events and
 * the socket, and starts sampling. */
int daemon_start(daemon_ctx *d);

/* Runs the loop until SIGTERM/SIGINT; then drains and commits everything. */
int daemon_run(daemon_ctx *d);
