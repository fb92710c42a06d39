/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* Kernel uevents from a raw NETLINK_KOBJECT_UEVENT socket bound to the
 * kernel's multicast group (1). Raw netlink rather than libsystemd's
 * sd_device_monitor: that one listens to udevd's re-broadcasts (group 2),
 * which need systemd-udevd running and come from a userspace sender; a
 * module's add/remove must come from the kernel itself, and only messages
 * with sender port id 0 and SCM_CREDENTIALS uid 0 are accepted. */

#include <event2/event.h>
#include <stdint.h>

#include "kernel/uevent.h"

typedef struct uevent_monitor uevent_monitor;

typedef struct uevent_monitor_stats {
        uint64_t received;      /* datagrams read */
        uint64_t accepted;      /* from the kernel and well-formed */
        uint64_t forged;        /* not sent by the kernel (port id != 0 or uid != 0, or no credentials): dropped */
        uint64_t malformed;     /* from the kernel but unparsable: dropped */
        uint64_t overruns;      /* ENOBUFS: the socket buffer overflowed, events were lost */
} uevent_monitor_stats;

/* ev: a kernel uevent. lost: events were dropped (ENOBUFS); ev is NULL then. */
typedef void (*uevent_monitor_cb)(const uevent *ev, bool lost, void *userdata);

int uevent_monitor_new(struct event_base *base, uevent_monitor_cb cb, void *userdata, uevent_monitor **ret);
uevent_monitor *uevent_monitor_free(uevent_monitor *m);
const uevent_monitor_stats *uevent_monitor_get_stats(const uevent_monitor *m);
