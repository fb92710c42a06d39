/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Units and containers from cgroup paths (cgroup.c). */
#include <string.h>

#include "cgroup.h"
#include "macro.h"
#include "test.h"

#define ID64 "4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"

static void expect(const char *path, const char *unit, const char *container, const char *pod) {
        cgroup_info i;

        cgroup_info_of(path, &i);
        if (strcmp(i.unit, unit) != 0 || strcmp(i.container, container) != 0 || strcmp(i.pod, pod) != 0)
                TEST_FAIL_("%s: expected unit '%s' container '%s' pod '%s', got '%s' '%s' '%s'", path, unit, container,
                           pod, i.unit, i.container, i.pod);
}

TEST(units_of_systemd_layouts) {
        expect("/system.slice/nginx.service", "nginx.service", "", "");
        expect("/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service", "", "");
        expect("/init.scope", "init.scope", "", "");
        expect("/user.slice/user-1000.slice/session-3.scope", "session-3.scope", "", "");
        /* A user manager's units are its: not the system's of the same name. */
        expect("/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo.service",
               "user@1000.service/app-foo.service", "", "");
        expect("/user.slice/user-1000.slice/user@1000.service/init.scope", "user@1000.service/init.scope", "", "");
        expect("/user.slice/user-1000.slice/user@1000.service/app.slice", "user@1000.service", "", "");
        expect("/user.slice/user-1000.slice/user@1000.service", "user@1000.service", "", "");
        /* So are those of a container's own systemd. */
        expect("/machine.slice/libpod-" ID64 ".scope/container/system.slice/sshd.service",
               "libpod-" ID64 ".scope/sshd.service", ID64, "");
        /* Only slices: the innermost. */
        expect("/system.slice", "system.slice", "", "");
        expect("/machine.slice/", "machine.slice", "", "");
        /* No unit at all. */
        expect("/", "", "", "");
        expect("", "", "", "");
        expect("/mygroup/sub", "", "", "");
        /* A service's own sub-cgroups stay the service's. */
        expect("/system.slice/foo.service/payload", "foo.service", "", "");
        /* Not units: a bare suffix, or a suffix inside a name. */
        expect("/.service/x.servicex", "", "", "");
}

TEST(containers_of_runtimes) {
        expect("/system.slice/docker-" ID64 ".scope", "docker-" ID64 ".scope", ID64, "");
        expect("/docker/" ID64, "", ID64, "");
        expect("/machine.slice/libpod-" ID64 ".scope/container", "libpod-" ID64 ".scope", ID64, "");
        expect("/machine.slice/libpod-conmon-" ID64 ".scope", "libpod-conmon-" ID64 ".scope", "", "");
        expect("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_0000_4000_8000_0123456789ab.slice/"
               "cri-containerd-" ID64 ".scope",
               "cri-containerd-" ID64 ".scope", ID64, "1a2b3c4d-0000-4000-8000-0123456789ab");
        expect("/kubepods.slice/kubepods-pod1a2b3c4d_0000_4000_8000_0123456789ab.slice/crio-" ID64 ".scope",
               "crio-" ID64 ".scope", ID64, "1a2b3c4d-0000-4000-8000-0123456789ab");
        expect("/kubepods/besteffort/pod1a2b3c4d-0000-4000-8000-0123456789ab/" ID64, "", ID64,
               "1a2b3c4d-0000-4000-8000-0123456789ab");
        /* 63 or 65 digits, or upper case, are not ids. */
        expect("/docker/" ID64 "0", "", "", "");
        expect("/docker/4F1C2B3A5D6E7F8091A2B3C4D5E6F708192A3B4C5D6E7F8091A2B3C4D5E6F708", "", "", "");
}

TEST(odd_and_deep_paths) {
        char deep[8192];
        size_t n = 0;

        /* Names with spaces, quotes, control bytes and non-UTF-8. */
        expect("/system.slice/we\"ird \\x2d\x01\xff.service", "we\"ird \\x2d\x01\xff.service", "", "");
        /* Deeper than a unit name may be long: truncated, not overrun. */
        for (int i = 0; i < 1000; i++)
                n += (size_t) snprintf(deep + n, sizeof deep - n, "/d%d", i);
        snprintf(deep + n, sizeof deep - n, "/%0300d.service", 7);
        cgroup_info info;
        cgroup_info_of(deep, &info);
        ASSERT_EQ(strlen(info.unit), CGROUP_UNIT_MAX - 1);
        ASSERT_TRUE(cgroup_path_under(deep, "/d0/d1/d2"));
        /* A unit name longer than the buffer matches no glob. */
        ASSERT_TRUE(!cgroup_unit_matches(deep, "*.service"));
}

TEST(unit_globs_match_any_enclosing_unit) {
        const char *p = "/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo.service";

        ASSERT_TRUE(cgroup_unit_matches(p, "user@1000.service/app-foo.service"));
        ASSERT_TRUE(cgroup_unit_matches(p, "*app-foo.service"));
        ASSERT_TRUE(cgroup_unit_matches(p, "user@1000.service"));
        ASSERT_TRUE(cgroup_unit_matches(p, "user@*.service"));
        ASSERT_TRUE(cgroup_unit_matches(p, "user.slice"));
        ASSERT_TRUE(cgroup_unit_matches(p, "user@1000.service/app.slice"));
        /* A user's unit is not the system's of that name. */
        ASSERT_TRUE(!cgroup_unit_matches(p, "app-foo.service"));
        ASSERT_TRUE(!cgroup_unit_matches(p, "app-*"));
        ASSERT_TRUE(!cgroup_unit_matches(p, "app-foo"));
        ASSERT_TRUE(!cgroup_unit_matches("/user.slice/user-1000.slice/user@1000.service/app.slice/sshd.service",
                                         "sshd.service"));
        ASSERT_TRUE(cgroup_unit_matches("/system.slice/sshd.service", "sshd.service"));
        ASSERT_TRUE(!cgroup_unit_matches(p, "nginx.service"));
        ASSERT_TRUE(!cgroup_unit_matches("/mygroup/x", "*"));
}

TEST(path_prefixes_are_whole_components) {
        ASSERT_TRUE(cgroup_path_under("/system.slice/x.service", "/system.slice"));
        ASSERT_TRUE(cgroup_path_under("/system.slice/x.service", "system.slice/"));
        ASSERT_TRUE(cgroup_path_under("/system.slice", "/system.slice"));
        ASSERT_TRUE(cgroup_path_under("/system.slice", "/"));
        ASSERT_TRUE(!cgroup_path_under("/system.slicex", "/system.slice"));
        ASSERT_TRUE(!cgroup_path_under("/system.slice", "/system.slice/x.service"));
}

TEST(container_prefixes) {
        ASSERT_TRUE(cgroup_container_matches("/docker/" ID64, "4f1c2b3a5d6e"));
        ASSERT_TRUE(cgroup_container_matches("/docker/" ID64, ID64));
        ASSERT_TRUE(!cgroup_container_matches("/docker/" ID64, "4f1c2b3a5d6f"));
        ASSERT_TRUE(!cgroup_container_matches("/docker/" ID64, ""));
        ASSERT_TRUE(!cgroup_container_matches("/docker/" ID64, "4F1C"));
        ASSERT_TRUE(!cgroup_container_matches("/system.slice/x.service", "4f"));
}
