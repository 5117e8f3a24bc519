// SPDX-License-Identifier: GPL-2.0
/*
 * mewa_rto: the handshake half of seed 003's fix, as a sock_ops program
 * attached to a cgroup (`mewa_cc_bpf::rto::attach`).
 *
 * A phone whose radio sleeps holds its first packet for the promotion
 * (3G: about 2 s from IDLE). Linux retransmits a SYN, and a server its
 * SYN-ACK, after TCP_TIMEOUT_INIT (1 s): the copy is spurious, both reach
 * the peer, and a retransmitted handshake gives no RTT sample. Only a
 * sock_ops program may choose that first timeout (BPF_SOCK_OPS_TIMEOUT_INIT,
 * in jiffies); it does here for peers in mewa_rto_rules, a longest-prefix
 * table of the addresses behind a radio, each with the timeout that covers
 * its promotion.
 *
 * The timeout of an established connection after idle cannot be raised
 * from BPF (TCP_BPF_RTO_MIN only lowers it; see docs/LAB.md); the lab puts
 * that floor on the routes instead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "GPL";

/* Jiffies per second of the running kernel (libbpf fills it in). */
extern unsigned int CONFIG_HZ __kconfig;

#define AF_INET 2

/* Must match mewa_cc_bpf::rto (an LPM key: prefix length, then the IPv4
 * address in network byte order). */
struct rto_key {
	__u32 prefixlen;
	__u32 addr;
};

struct rto_rule {
	/* The first SYN / SYN-ACK retransmission timeout, ms; 0: default. */
	__u32 syn_rto_ms;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 256);
	__type(key, struct rto_key);
	__type(value, struct rto_rule);
} mewa_rto_rules SEC(".maps");

/* How many handshakes got a longer first timeout. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} mewa_rto_applied SEC(".maps");

SEC("sockops")
int mewa_rto(struct bpf_sock_ops *skops)
{
	struct rto_key key;
	struct rto_rule *rule;
	__u32 zero = 0;
	__u64 *n;

	if (skops->op != BPF_SOCK_OPS_TIMEOUT_INIT || skops->family != AF_INET)
		return 1;
	key.prefixlen = 32;
	key.addr = skops->remote_ip4;
	rule = bpf_map_lookup_elem(&mewa_rto_rules, &key);
	if (!rule || !rule->syn_rto_ms)
		return 1;
	/* Rounded up: never shorter than asked. */
	skops->reply = (int)(((__u64)rule->syn_rto_ms * CONFIG_HZ + 999) / 1000);
	n = bpf_map_lookup_elem(&mewa_rto_applied, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	return 1;
}
