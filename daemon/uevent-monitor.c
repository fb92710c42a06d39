/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Kernel uevents from raw netlink, filtered to the kernel's own (sender
 * pid 0) and handed to the tracker (uevent-monitor.h). */
#include <errno.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "uevent-monitor.h"

/* Module loads come in bursts at boot (hundreds of uevents in a second);
 * a large buffer keeps ENOBUFS, and the rescans it causes, rare. */
#define UEVENT_RCVBUF_BYTES (4 * 1024 * 1024)

struct uevent_monitor {
        int fd;
        struct event *ev;
        uevent_monitor_cb cb;
        void *userdata;
        uevent_monitor_stats stats;
};

static void on_readable(evutil_socket_t fd, short what, void *userdata) {
        uevent_monitor *m = userdata;

        /* A bounded number per wake-up: the loop has ring buffers to drain too. */
        for (unsigned i = 0; i < 256; i++) {
                uint8_t buf[UEVENT_BUFFER_SIZE + 1];
                union {
                        struct cmsghdr h;
                        uint8_t b[CMSG_SPACE(sizeof(struct ucred))];
                } ctl;
                struct sockaddr_nl sa = {};
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
                struct msghdr msg = {
                        .msg_name = &sa, .msg_namelen = sizeof sa,
                        .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = &ctl, .msg_controllen = sizeof ctl,
                };
                const struct ucred *cred = NULL;
                uevent ev;
                ssize_t n;
                int r;

                n = recvmsg(fd, &msg, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                return;
                        if (errno == ENOBUFS) {
                                m->stats.overruns++;
                                log_warning_ratelimited("Kernel uevents were lost (the socket buffer overflowed); rescanning the modules.");
                                m->cb(NULL, true, m->userdata);
                                continue;
                        }
                        log_warning_errno_ratelimited(errno, "Failed to read a uevent: %m");
                        return;
                }
                m->stats.received++;

                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                            c->cmsg_len >= CMSG_LEN(sizeof(struct ucred)))
                                cred = (const struct ucred *) CMSG_DATA(c);

                /* The kernel sends with port id 0 and root's credentials; any
                 * process with CAP_NET_ADMIN can multicast to the group too. */
                if (msg.msg_namelen != sizeof sa || sa.nl_pid != 0 || !cred || cred->uid != 0) {
                        m->stats.forged++;
                        log_warning_ratelimited("Dropped a uevent not sent by the kernel (port id %u, uid %d).",
                                    (unsigned) sa.nl_pid, cred ? (int) cred->uid : -1);
                        continue;
                }
                if (msg.msg_flags & MSG_TRUNC) {
                        m->stats.malformed++;
                        log_warning_ratelimited("Dropped a uevent longer than %d bytes.", UEVENT_BUFFER_SIZE);
                        continue;
                }
                r = uevent_parse(buf, (size_t) n, &ev);
                if (r < 0) {
                        m->stats.malformed++;
                        log_warning_errno_ratelimited(r, "Dropped a malformed uevent from the kernel: %m");
                        continue;
                }
                m->stats.accepted++;
                m->cb(&ev, false, m->userdata);
        }
}

int uevent_monitor_new(struct event_base *base, uevent_monitor_cb cb, void *userdata, uevent_monitor **ret) {
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
        uevent_monitor *m;
        int one = 1, size = UEVENT_RCVBUF_BYTES;

        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->cb = cb;
        m->userdata = userdata;
        m->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
        if (m->fd < 0) {
                int r = -errno;
                free(m);
                return r;
        }
        if (setsockopt(m->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0 ||
            bind(m->fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int r = -errno;
                uevent_monitor_free(m);
                return r;
        }
        /* FORCE goes past rmem_max with CAP_NET_ADMIN; without it, the plain one. */
        if (setsockopt(m->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                (void) setsockopt(m->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);

        m->ev = event_new(base, m->fd, EV_READ | EV_PERSIST, on_readable, m);
        if (!m->ev || event_add(m->ev, NULL) < 0) {
                uevent_monitor_free(m);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

uevent_monitor *uevent_monitor_free(uevent_monitor *m) {
        if (!m)
                return NULL;
        if (m->ev)
                event_free(m->ev);
        if (m->fd >= 0)
                close(m->fd);
        free(m);
        return NULL;
}

const uevent_monitor_stats *uevent_monitor_get_stats(const uevent_monitor *m) {
        return &m->stats;
}
