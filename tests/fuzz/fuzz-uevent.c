/* SPDX-License-Identifier: GPL-2.0-or-later */
/* uevent_parse() on arbitrary datagrams; what it accepts must be
 * self-consistent. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/uevent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uevent u;
        int r;

        memset(&u, 'x', sizeof(u));
        r = uevent_parse(data, size, &u);
        if (r < 0) {
                if (r != -EBADMSG && r != -EPROTONOSUPPORT)
                        abort();
                return 0;
        }

        if (size == 0 || size > UEVENT_BUFFER_SIZE)
                abort();
        if (strnlen(u.action_name, sizeof(u.action_name)) >= sizeof(u.action_name) ||
            strnlen(u.devpath, sizeof(u.devpath)) >= sizeof(u.devpath) ||
            strnlen(u.subsystem, sizeof(u.subsystem)) >= sizeof(u.subsystem) ||
            strnlen(u.module, sizeof(u.module)) >= sizeof(u.module))
                abort();
        if (u.action_name[0] == 0 || u.devpath[0] != '/')
                abort();
        if ((u.action == UEVENT_ACTION_ADD) != (strcmp(u.action_name, "add") == 0) ||
            (u.action == UEVENT_ACTION_REMOVE) != (strcmp(u.action_name, "remove") == 0))
                abort();
        /* The header the datagram starts with is "ACTION@DEVPATH". */
        if (memcmp(data, u.action_name, strlen(u.action_name)) != 0 || data[strlen(u.action_name)] != '@')
                abort();
        if (strcmp(u.subsystem, "module") == 0) {
                if (!module_name_is_valid(u.module) || strncmp(u.devpath, "/module/", 8) != 0 ||
                    strcmp(u.devpath + 8, u.module) != 0)
                        abort();
        } else if (u.module[0] != 0)
                abort();
        return 0;
}
