/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The uevent monitor (daemon/uevent-monitor.c) on a real netlink socket:
 * a uevent sent by a userspace process is dropped and counted as forged;
 * one the kernel sends (writing "change" to /sys/class/net/lo/uevent) is
 * handed on. Sending to the kernel's group and triggering a kernel uevent
 * need root: without it only the socket is checked, and the test says it
 * skipped the rest. Other tests send uevents too (test-module-tracking
 * forges 20,000): meson runs this one alone (is_parallel: false). */

#include <errno.h>
#include <event2/event.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "test.h"
#include "uevent-monitor.h"

typedef struct seen {
        unsigned events, lost, net_changes;
} seen;

static void on_uevent(const uevent *ev, bool lost, void *userdata) {
        seen *s = userdata;

        if (lost)
                s->lost++;
        else {
                s->events++;
                s->net_changes += streq(ev->subsystem, "net") && streq(ev->devpath, "/devices/virtual/net/lo") &&
                                  streq(ev->action_name, "change");
        }
}

/* Runs the loop until the monitor has read received datagrams, at most 5 s. */
static void run_until(struct event_base *base, const uevent_monitor *m, uint64_t received) {
        for (unsigned i = 0; i < 100 && uevent_monitor_get_stats(m)->received < received; i++) {
                struct timeval tv = { .tv_usec = 50000 };

                ASSERT_EQ(event_base_loopexit(base, &tv), 0);
                ASSERT_EQ(event_base_dispatch(base), 0);
        }
}

TEST(forged_uevents_are_dropped_and_kernel_ones_handed_on) {
        static const char forged[] = "add@/module/fake_x\0ACTION=add\0DEVPATH=/module/fake_x\0SUBSYSTEM=module\0SEQNUM=7";
        struct sockaddr_nl to = { .nl_family = AF_NETLINK, .nl_groups = 1 };
        struct event_base *base = event_base_new();
        uevent_monitor *m = NULL;
        seen s = {};
        FILE *f;
        int fd;

        ASSERT_TRUE(base);
        ASSERT_OK(uevent_monitor_new(base, on_uevent, &s, &m));
        if (geteuid() != 0) {
                uevent_monitor_free(m);
                event_base_free(base);
                TEST_SKIP("sending to the kernel's uevent group needs root\n");
        }

        fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(sendto(fd, forged, sizeof forged, 0, (struct sockaddr *) &to, sizeof to) >= 0);
        close(fd);
        run_until(base, m, 1);
        ASSERT_EQ(uevent_monitor_get_stats(m)->forged, 1);
        ASSERT_EQ(uevent_monitor_get_stats(m)->accepted, 0);
        ASSERT_EQ(s.events, 0);

        /* The kernel's own: accepted whatever the subsystem (the tracker
         * ignores what is not a module). */
        f = fopen("/sys/class/net/lo/uevent", "we");
        if (!f) {
                uevent_monitor_free(m);
                event_base_free(base);
                TEST_SKIP("/sys/class/net/lo/uevent is not writable here\n");
        }
        ASSERT_TRUE(fputs("change", f) >= 0);
        ASSERT_EQ(fclose(f), 0);
        run_until(base, m, 2);
        ASSERT_GE(uevent_monitor_get_stats(m)->accepted, 1);
        ASSERT_EQ(s.net_changes, 1);
        ASSERT_EQ(uevent_monitor_get_stats(m)->forged, 1);

        uevent_monitor_free(m);
        event_base_free(base);
}
