/* SPDX-License-Identifier: GPL-2.0-or-later */
/* not written yet */
