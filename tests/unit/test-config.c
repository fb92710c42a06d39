/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "test.h"

TEST(not_written_yet) {
        TEST_SKIP("test-config is not written yet");
}
