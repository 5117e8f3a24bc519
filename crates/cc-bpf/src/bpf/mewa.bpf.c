// SPDX-License-Identifier: GPL-2.0
/*
 * mewa's Linux TCP congestion controls, registered together by `mewa cc load`:
 *
 *   mewa_fld  FLD_TCP (seed 002 §2.1)
 *   mewa_iw   the kernel's cubic, started from the window a client asked for
 *             (seed 001, content-aware initial window)
 *
 * Both read the initial window a connection was granted from the socket
 * storage map mewa_iw_req, which the origin fills (keyed by the socket's fd)
 * before it switches the socket to the control: the switch calls init(),
 * and init() sets the window. The origin makes the decision at the client's
 * first request, after the TLS handshake has already sent data, which is
 * why it cannot be an initial window set at connection setup (TCP_BPF_IW).
 *
 * FLD_TCP:
 *
 * The rules are those of crates/cc (mewa_cc::Window::fld), which is tested
 * in virtual time; this file maps them onto the kernel's hooks:
 *
 *   cong_avoid   the window growth (slow start x3, then one segment a window)
 *   ssthresh     the window after a loss found by fast retransmit (Relentless
 *                below 2 MB acknowledged, halving after)
 *   pkts_acked   Relentless again: later losses of the same recovery each
 *                take one more segment off
 *   cwnd_event   a retransmission timeout halves, in both modes
 *   undo_cwnd    a spurious reduction is undone, as Reno does
 *   sndbuf_expand  room in the send buffer for a window that triples
 *
 * The kernel counts the window in segments (snd_cwnd) and the core in bytes;
 * "bytes delivered" is tcp_sock.bytes_acked in both.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

/* "The threshold value is selected to be 2 MB" */
#define FLD_THRESHOLD_BYTES 2000000ULL
/* The smallest window after a loss: two segments (RFC 5681). */
#define MIN_CWND 2U

/* Per-connection state, in the socket's icsk_ca_priv (104 bytes at most). */
struct fld {
	/* The window the current Relentless recovery is heading for,
	 * before losses found after its start; 0 outside one. */
	__u32 target;
	/* tcp_sock.lost when that recovery began. */
	__u32 lost_at_start;
};

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/* ------------------------------------------------ the granted window */

/* What the origin asks the control to apply, one socket at a time. Must
 * match mewa_cc_bpf::IwRequest (two u32, native endian). */
struct iw_req {
	/* The window to start from, segments; 0: nothing asked (or done). */
	__u32 segments;
	/* What init() set, after the bounds below; 0 until then. */
	__u32 granted;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct iw_req);
} mewa_iw_req SEC(".maps");

/* Sets the window the origin asked for, once: no more than the peer's
 * receive window allows in segments (the sender could not use more), nor the
 * socket's clamp, nor less than one segment. */
static __always_inline void apply_requested_window(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct iw_req *r = bpf_sk_storage_get(&mewa_iw_req, sk, 0, 0);
	__u32 w, mss, rwnd;

	if (!r || !r->segments)
		return;
	w = r->segments;
	mss = tp->mss_cache ? tp->mss_cache : 1;
	rwnd = tp->snd_wnd / mss;
	if (w > rwnd)
		w = rwnd;
	if (w > tp->snd_cwnd_clamp)
		w = tp->snd_cwnd_clamp;
	if (w < 1)
		w = 1;
	tp->snd_cwnd = w;
	r->granted = w;
	r->segments = 0;
}

static __always_inline struct fld *fld_of(const struct sock *sk)
{
	return (struct fld *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline bool short_flow(const struct tcp_sock *tp)
{
	return tp->bytes_acked < FLD_THRESHOLD_BYTES;
}

static __always_inline __u32 at_least_min(__u32 w)
{
	return w > MIN_CWND ? w : MIN_CWND;
}

static __always_inline void fld_start(struct sock *sk)
{
	struct fld *ca = fld_of(sk);

	ca->target = 0;
	ca->lost_at_start = 0;
	apply_requested_window(sk);
}

SEC("struct_ops")
void BPF_PROG(fld_init, struct sock *sk)
{
	fld_start(sk);
	/* A socket that bbr initialised keeps pacing after a switch to
	 * another control (GUIDE §3); FLD_TCP is window-based, so no
	 * pacing unless a qdisc asks for it. */
	sk->sk_pacing_status = SK_PACING_NONE;
}

SEC("struct_ops")
void BPF_PROG(fld_paced_init, struct sock *sk)
{
	fld_start(sk);
	/* mewa_fld_paced: the same window, sent by the kernel's own pacing
	 * (tcp_internal_pacing, no qdisc needed) at tcp_pacing_ss_ratio
	 * (200 %) of cwnd / srtt in slow start and tcp_pacing_ca_ratio
	 * (120 %) after. A window that triples leaves in a burst of up to
	 * three times what the last round trip delivered; a shallow queue
	 * kept full by other flows drops the burst's tail, which a short
	 * flow can only repair by a loss probe or a timeout. Paced, the
	 * window's segments reach the queue spread over the round trip. */
	sk->sk_pacing_status = SK_PACING_NEEDED;
}

/* Whether the window limited the sender, as the kernel's
 * tcp_is_cwnd_limited() decides, with room for a window that triples:
 * in slow start the window may grow to three times what was in flight. */
static __always_inline bool cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 factor = short_flow(tp) ? 3 : 2;

	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < factor * tp->max_packets_out;
	return false;
}

SEC("struct_ops")
void BPF_PROG(fld_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;

	if (!cwnd_limited(sk))
		return;
	if (cwnd < tp->snd_ssthresh) {
		/* "While traditional TCP doubles its congestion window every
		 * round trip in the Slow-start phase, FLD_TCP triples its
		 * congestion window": two segments per acknowledged one while
		 * the flow is short, one (Reno) after. */
		__u32 gain = short_flow(tp) ? 2 : 1;
		__u32 grown = cwnd + gain * acked;

		if (grown > tp->snd_ssthresh)
			grown = tp->snd_ssthresh;
		if (grown > tp->snd_cwnd_clamp)
			grown = tp->snd_cwnd_clamp;
		tp->snd_cwnd = grown;
		return;
	}
	/* Congestion avoidance: one segment per window of acknowledged
	 * segments (the kernel's tcp_cong_avoid_ai). */
	if (tp->snd_cwnd_cnt >= cwnd) {
		tp->snd_cwnd_cnt = 0;
		cwnd++;
	}
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= cwnd) {
		__u32 delta = tp->snd_cwnd_cnt / cwnd;

		tp->snd_cwnd_cnt -= delta * cwnd;
		cwnd += delta;
	}
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

SEC("struct_ops")
__u32 BPF_PROG(fld_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct fld *ca = fld_of(sk);
	__u32 cwnd = tp->snd_cwnd;

	if (short_flow(tp)) {
		/* "Instead of multiplicative decrease upon packet loss, this
		 * TCP reduces the congestion window by the amount of lost
		 * segments only." At least one segment was lost. */
		__u32 lost = tp->lost_out ? tp->lost_out : 1;

		ca->target = at_least_min(cwnd > lost ? cwnd - lost : 0);
		ca->lost_at_start = tp->lost;
		return ca->target;
	}
	/* "after the TCP flow exceeds the threshold value, FLD_TCP functions
	 * in traditional RENO behavior" */
	ca->target = 0;
	return at_least_min(cwnd >> 1);
}

SEC("struct_ops")
void BPF_PROG(fld_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct fld *ca = fld_of(sk);
	__u32 later;

	if (!ca->target)
		return;
	/* The recovery ends with the window at ssthresh: every segment
	 * found lost since it began takes one more segment off. */
	later = tp->lost - ca->lost_at_start;
	tp->snd_ssthresh = at_least_min(ca->target > later ? ca->target - later : 0);
}

SEC("struct_ops")
void BPF_PROG(fld_set_state, struct sock *sk, __u8 new_state)
{
	struct fld *ca = fld_of(sk);

	/* Back to normal (or into a timeout): the recovery is over. */
	if (new_state == TCP_CA_Open || new_state == TCP_CA_Loss)
		ca->target = 0;
}

SEC("struct_ops")
void BPF_PROG(fld_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct fld *ca = fld_of(sk);

	if (ev != CA_EVENT_LOSS)
		return;
	/* A retransmission timeout: the kernel asked ssthresh() just before
	 * this event and takes the window to one segment after it. A timeout
	 * says the path lost a whole window, so slow start up to half of it,
	 * in both modes (as mewa_cc's on_rto). */
	ca->target = 0;
	tp->snd_ssthresh = at_least_min(tp->prior_cwnd >> 1);
}

SEC("struct_ops")
__u32 BPF_PROG(fld_undo_cwnd, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	/* The reduction was spurious (DSACK, timestamps): back to the window
	 * before it, as Reno's undo. */
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC("struct_ops")
__u32 BPF_PROG(fld_sndbuf_expand, struct sock *sk)
{
	/* The kernel sizes the send buffer at twice the window, enough for a
	 * window that doubles each round trip; one that triples would wait
	 * on the buffer instead (bbr asks for 3 for the same reason). */
	return 3;
}

/* The hooks of both FLD_TCP controls: they differ in init() alone. */
#define FLD_HOOKS                                         \
	.cong_avoid = (void *)fld_cong_avoid,             \
	.ssthresh = (void *)fld_ssthresh,                 \
	.pkts_acked = (void *)fld_pkts_acked,             \
	.set_state = (void *)fld_set_state,               \
	.cwnd_event = (void *)fld_cwnd_event,             \
	.undo_cwnd = (void *)fld_undo_cwnd,               \
	.sndbuf_expand = (void *)fld_sndbuf_expand

SEC(".struct_ops")
struct tcp_congestion_ops mewa_fld = {
	.init = (void *)fld_init,
	FLD_HOOKS,
	.name = "mewa_fld",
};

/* FLD_TCP paced: every rule of mewa_fld, and the kernel paces the window. */
SEC(".struct_ops")
struct tcp_congestion_ops mewa_fld_paced = {
	.init = (void *)fld_paced_init,
	FLD_HOOKS,
	.name = "mewa_fld_paced",
};

/* ------------------------------------------------------------ mewa_iw */

/* The kernel's cubic, called through the kfuncs it exports to BPF
 * congestion controls: mewa_iw is cubic in everything but its start. */
extern void cubictcp_init(struct sock *sk) __ksym;
extern __u32 cubictcp_recalc_ssthresh(struct sock *sk) __ksym;
extern void cubictcp_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern void cubictcp_state(struct sock *sk, __u8 new_state) __ksym;
extern void cubictcp_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern void cubictcp_acked(struct sock *sk, const struct ack_sample *sample) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
void BPF_PROG(iw_init, struct sock *sk)
{
	cubictcp_init(sk);
	/* As in fld_init: no pacing left over from a bbr listener. */
	sk->sk_pacing_status = SK_PACING_NONE;
	/* Seed 001: "such a value will be embedded in the very first HTTP
	 * message to be enforced by the remote web server". */
	apply_requested_window(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(iw_ssthresh, struct sock *sk)
{
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(iw_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	cubictcp_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
void BPF_PROG(iw_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
}

SEC("struct_ops")
void BPF_PROG(iw_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	cubictcp_cwnd_event(sk, ev);
}

SEC("struct_ops")
void BPF_PROG(iw_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	cubictcp_acked(sk, sample);
}

SEC("struct_ops")
__u32 BPF_PROG(iw_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mewa_iw = {
	.init = (void *)iw_init,
	.ssthresh = (void *)iw_ssthresh,
	.cong_avoid = (void *)iw_cong_avoid,
	.set_state = (void *)iw_set_state,
	.cwnd_event = (void *)iw_cwnd_event,
	.pkts_acked = (void *)iw_pkts_acked,
	.undo_cwnd = (void *)iw_undo_cwnd,
	.name = "mewa_iw",
};
