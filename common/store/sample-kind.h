/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What a stored sample counts. */
typedef enum sample_kind {
        SAMPLE_KIND_CPU,        /* samples of the CPU-time event; period: the event's */
        SAMPLE_KIND_OFFCPU,     /* off-CPU waits (offcpu = on); period: nanoseconds waited */
        _SAMPLE_KIND_MAX,
} sample_kind;
