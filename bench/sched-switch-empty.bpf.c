// SPDX-License-Identifier: GPL-2.0-or-later
/* The floor of bench/offcpu.sh: a program on the same tracepoint as the
 * off-CPU one (tp_btf/sched_switch) that does nothing. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_switch")
int sched_switch_empty(void *ctx) {
        return 0;
}
