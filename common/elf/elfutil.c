/* SPDX-License-Identifier: GPL-2.0-or-later */
/* libelf set up once (elfutil.h). */

#include <libelf.h>
#include <pthread.h>

#include "elf/elfutil.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ready;

static void init(void) {
        ready = elf_version(EV_CURRENT) != EV_NONE;
}

bool elf_library_ready(void) {
        return pthread_once(&once, init) == 0 && ready;
}
