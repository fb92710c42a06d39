/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Kernel uevents as read from a NETLINK_KOBJECT_UEVENT socket bound to the
 * kernel's multicast group 1. One datagram is "ACTION@DEVPATH\0" followed by
 * "KEY=VALUE\0" pairs (lib/kobject_uevent.c: the header, then ACTION=,
 * DEVPATH=, SUBSYSTEM=, further keys, SEQNUM=). udevd's re-broadcasts on
 * group 2 start with "libudev\0" and a binary header instead; they are not
 * kernel messages and are rejected. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's UEVENT_BUFFER_SIZE; a datagram longer than this is not from it. */
#define UEVENT_BUFFER_SIZE 2048
/* MODULE_NAME_LEN (64 - sizeof(unsigned long)) on 64-bit kernels, NUL included. */
#define MODULE_NAME_MAX 56

typedef enum uevent_action {
        UEVENT_ACTION_OTHER,    /* change, bind, unbind, move, online, offline */
        UEVENT_ACTION_ADD,
        UEVENT_ACTION_REMOVE,
} uevent_action;

typedef struct uevent {
        uevent_action action;
        char action_name[16];           /* as sent, "add", "remove", ... */
        char devpath[256];              /* "/module/brd" */
        char subsystem[64];             /* "module", "" if absent */
        uint64_t seqnum;                /* SEQNUM=, 0 if absent */
        /* For SUBSYSTEM=module with DEVPATH "/module/NAME": NAME, else "". */
        char module[MODULE_NAME_MAX];
} uevent;

/* Parses one datagram. Returns 0 and fills *ret, or
 *  -EPROTONOSUPPORT  a libudev message (udevd's format, not the kernel's);
 *  -EBADMSG          malformed: empty, longer than UEVENT_BUFFER_SIZE, no
 *                    "ACTION@DEVPATH" header, a pair without '=', a field
 *                    that does not fit, ACTION= or DEVPATH= missing or not
 *                    equal to the header's, an unparsable SEQNUM=, or a
 *                    SUBSYSTEM=module message whose DEVPATH is not
 *                    "/module/NAME" with NAME a valid module name.
 * A missing NUL after the last pair is tolerated (the kernel sends one;
 * the length is what counts). *ret is untouched on failure. */
int uevent_parse(const void *buf, size_t len, uevent *ret);

/* A module name as the kernel shows it in /sys/module and /proc/modules:
 * 1..MODULE_NAME_MAX-1 characters of [A-Za-z0-9_-]. */
bool module_name_is_valid(const char *name);
