// SPDX-License-Identifier: MIT
/*
 * SOFTRDMA_FAULTS: the parser and the decisions (grammar in docs/softrdma-faults.7).
 *
 *   SOFTRDMA_FAULTS = RULE { ";" RULE }
 *   RULE   = TARGET ":" FAULT { "," FAULT } | "seed=" N
 *   TARGET = "all" | "qp=" INDEX | "qpn=" QPN
 *   FAULT  = "drop=" RATE | "delay=" MS "ms" | "rnr=" RATE | "access=" RATE
 *          | "remote-op=" RATE | "kill=" N
 *   RATE   = "all" | "1/" N | PERCENT "%"
 *
 * A QP takes the first rule that names it. A bad variable makes every device open fail
 * (EINVAL) after one message naming the bad part: a CI job that asked for faults must not
 * pass quietly without them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "emu/internal.h"

#define FAULT_MAX_RULES	16

enum rate_kind { RATE_NEVER, RATE_EVERY, RATE_PERCENT };

struct fault_rate {
	enum rate_kind kind;
	uint32_t every;		/* RATE_EVERY: the Nth, 2Nth, ... event */
	double percent;		/* RATE_PERCENT */
};

enum target_kind { TARGET_ALL, TARGET_INDEX, TARGET_QPN };

struct fault_rule {
	enum target_kind target;
	uint32_t value;
	struct fault_rate drop, rnr, access, remote_op;
	uint32_t delay_ms;
	uint64_t kill_after;	/* request frames sent before the cut; 0: never */
	bool has_kill;
};

struct fault_qp {
	const struct fault_rule *rule;
	uint64_t rng;
	uint64_t frames, requests, rdma_requests, recv_requests;
	uint64_t messages;
	bool cut;		/* killed: nothing it sends arrives any more */
	uint32_t qpn;
	uint64_t dropped, delayed, refused;	/* what was done to it, told at the end */
};

static struct fault_rule rules[FAULT_MAX_RULES];
static int nrules;
static uint64_t seed = 1;
static int init_result;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_uint next_index;

struct parser {
	const char *at;
	const char *item;	/* where the part being parsed starts: what an error names */
	char *why;
	unsigned int len;
};

static int fail(struct parser *p, const char *what)
{
	int n = (int)strcspn(p->item, ",;");

	if (!n)
		n = (int)strlen(p->item);	/* an empty part: name what follows */

	snprintf(p->why, p->len, "at \"%.*s\": %s", n, p->item, what);
	return EINVAL;
}

static bool take(struct parser *p, const char *word)
{
	size_t n = strlen(word);

	if (strncmp(p->at, word, n))
		return false;
	p->at += n;
	return true;
}

/* A decimal or 0x-hex number up to max; false (nothing taken) if there is none. */
static bool take_number(struct parser *p, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*p->at < '0' || *p->at > '9')
		return false;
	errno = 0;
	v = strtoull(p->at, &end, 0);
	if (errno || v > max)
		return false;
	p->at = end;
	*out = v;
	return true;
}

static int parse_rate(struct parser *p, struct fault_rate *r)
{
	uint64_t n;
	char *end;
	double pc;

	p->item = p->at;
	if (take(p, "all")) {
		*r = (struct fault_rate){ .kind = RATE_EVERY, .every = 1 };
		return 0;
	}
	if (take(p, "1/")) {
		if (!take_number(p, UINT32_MAX, &n) || n == 0)
			return fail(p, "1/N needs a whole N from 1 to 4294967295");
		*r = (struct fault_rate){ .kind = RATE_EVERY, .every = (uint32_t)n };
		return 0;
	}
	pc = strtod(p->at, &end);
	if (end == p->at || *end != '%' || !(pc >= 0 && pc <= 100))
		return fail(p, "a rate is \"all\", \"1/N\" (every Nth) or \"P%\" (0 to 100)");
	p->at = end + 1;
	*r = (struct fault_rate){ .kind = RATE_PERCENT, .percent = pc };
	return 0;
}

static int parse_fault(struct parser *p, struct fault_rule *rule)
{
	uint64_t n;

	p->item = p->at;
	if (take(p, "drop="))
		return parse_rate(p, &rule->drop);
	if (take(p, "rnr="))
		return parse_rate(p, &rule->rnr);
	if (take(p, "access="))
		return parse_rate(p, &rule->access);
	if (take(p, "remote-op="))
		return parse_rate(p, &rule->remote_op);
	if (take(p, "delay=")) {
		if (!take_number(p, 60000, &n) || !take(p, "ms"))
			return fail(p, "delay is a number of milliseconds from 0 to 60000, as \"20ms\"");
		rule->delay_ms = (uint32_t)n;
		return 0;
	}
	if (take(p, "kill=")) {
		if (!take_number(p, UINT64_MAX, &n))
			return fail(p, "kill=N needs a whole number of messages");
		rule->kill_after = n;
		rule->has_kill = true;
		return 0;
	}
	return fail(p, "a fault is drop=, delay=, rnr=, access=, remote-op= or kill=");
}

static int parse_target(struct parser *p, struct fault_rule *rule)
{
	uint64_t n;

	p->item = p->at;
	if (take(p, "all")) {
		rule->target = TARGET_ALL;
	} else if (take(p, "qpn=")) {
		if (!take_number(p, QP_QPN_MASK, &n))
			return fail(p, "qpn= needs a QP number (24 bits, decimal or 0x hex)");
		rule->target = TARGET_QPN;
		rule->value = (uint32_t)n;
	} else if (take(p, "qp=")) {
		if (!take_number(p, UINT32_MAX, &n))
			return fail(p, "qp= needs the QP's index, counted from 0 in creation order");
		rule->target = TARGET_INDEX;
		rule->value = (uint32_t)n;
	} else {
		return fail(p, "a rule starts with all:, qp=INDEX: or qpn=QPN:, or is seed=N");
	}
	if (!take(p, ":"))
		return fail(p, "the QPs a rule names are followed by ':' and its faults");
	return 0;
}

static int parse_rule(struct parser *p, struct fault_rule *rule, uint64_t *seed_out)
{
	int ret;

	p->item = p->at;
	if (take(p, "seed=")) {
		if (!take_number(p, UINT64_MAX, seed_out))
			return fail(p, "seed=N needs a whole number");
		return 1;	/* no rule */
	}
	ret = parse_target(p, rule);
	while (!ret) {
		ret = parse_fault(p, rule);
		if (ret || !take(p, ","))
			break;
	}
	return ret;
}

static int parse(const char *spec, struct fault_rule *out, int *count, uint64_t *seed_out,
		 char *why, unsigned int len)
{
	struct parser p = { .at = spec, .item = spec, .why = why, .len = len };

	*count = 0;
	if (!*spec)
		return fail(&p, "empty: unset the variable for no faults");
	for (;;) {
		struct fault_rule rule = { 0 };
		int ret = parse_rule(&p, &rule, seed_out);

		if (ret == EINVAL)
			return ret;
		if (ret == 0) {
			if (*count == FAULT_MAX_RULES)
				return fail(&p, "more than 16 rules");
			out[(*count)++] = rule;
		}
		if (!*p.at)
			return 0;
		p.item = p.at;
		if (!take(&p, ";"))
			return fail(&p, "expected ',' or ';' here");
	}
}

int fault_parse_check(const char *spec, char *why, unsigned int len)
{
	struct fault_rule scratch[FAULT_MAX_RULES];
	uint64_t s;
	int n;

	return parse(spec, scratch, &n, &s, why, len);
}

static void init(void)
{
	const char *spec = getenv("SOFTRDMA_FAULTS");
	char why[160];

	if (!spec)
		return;
	init_result = parse(spec, rules, &nrules, &seed, why, sizeof(why));
	if (init_result) {
		nrules = 0;
		fprintf(stderr, "softrdma: SOFTRDMA_FAULTS=\"%s\": %s; the device will not open\n",
			spec, why);
		return;
	}
	fprintf(stderr, "softrdma: injecting faults: SOFTRDMA_FAULTS=\"%s\"\n", spec);
}

int fault_init(void)
{
	pthread_once(&init_once, init);
	return init_result;
}

static bool names(const struct fault_rule *r, uint32_t index, uint32_t qpn)
{
	return r->target == TARGET_ALL || (r->target == TARGET_INDEX && r->value == index) ||
	       (r->target == TARGET_QPN && r->value == qpn);
}

struct fault_qp *fault_attach(uint32_t qpn)
{
	uint32_t index;
	struct fault_qp *f;

	if (!nrules)
		return NULL;
	index = atomic_fetch_add(&next_index, 1);
	for (int i = 0; i < nrules; i++) {
		if (!names(&rules[i], index, qpn))
			continue;
		f = calloc(1, sizeof(*f));
		if (!f)
			return NULL;
		f->rule = &rules[i];
		f->qpn = qpn;
		/* Each QP its own sequence, the same from run to run for one seed. */
		f->rng = (seed + index + 1) * 0x9e3779b97f4a7c15ull;
		return f;
	}
	return NULL;
}

/* With SOFTRDMA_VERBOSE, each faulted QP says at its end what was done to it. */
void fault_detach(struct fault_qp *f)
{
	if (f && getenv("SOFTRDMA_VERBOSE"))
		fprintf(stderr, "softrdma: QP 0x%06x: %" PRIu64 " frames dropped, %" PRIu64
			" delayed, %" PRIu64 " requests refused%s\n", f->qpn, f->dropped,
			f->delayed, f->refused, f->cut ? ", link cut" : "");
	free(f);
}

/* xorshift64*: cheap, and reproducible for a given seed. */
static double next_percent(struct fault_qp *f)
{
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return (double)((f->rng * 0x2545f4914f6cdd1dull) >> 11) * (100.0 / (double)(1ull << 53));
}

/* The count-th event (from 1) of a kind: does the rate pick it? */
static bool hits(struct fault_qp *f, const struct fault_rate *r, uint64_t count)
{
	switch (r->kind) {
	case RATE_EVERY:
		return count % r->every == 0;
	case RATE_PERCENT:
		return next_percent(f) < r->percent;
	default:
		return false;
	}
}

/* The link is gone: both streams are reset, and nothing the QP sends arrives any more. */
static void cut(struct emu_qp *qp, struct fault_qp *f)
{
	f->cut = true;
	if (qp->streams.req && qp->streams.req->watch.fd >= 0)
		shutdown(qp->streams.req->watch.fd, SHUT_RDWR);
	if (qp->streams.resp && qp->streams.resp->watch.fd >= 0)
		shutdown(qp->streams.resp->watch.fd, SHUT_RDWR);
}

bool fault_on_frame(struct emu_qp *qp, const uint8_t *frame)
{
	struct fault_qp *f = qp->faults;
	const struct fault_rule *r = f->rule;
	uint8_t opcode = frame[4];

	/*
	 * The hello also goes out through conn_send_frame(): its fifth byte is the high byte of
	 * WIRE_VERSION, 0, and opcode 0 (SEND_FIRST) is one we never send. It always goes out,
	 * as a real link's connection setup is not what these faults are about.
	 */
	if (!wire_header_len(opcode))
		return false;
	if (r->delay_ms) {
		struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		f->delayed++;
	}
	if (r->has_kill && (wire_opcodes[opcode].flags & OPF_REQUEST) && !f->cut &&
	    ++f->messages > r->kill_after)
		cut(qp, f);
	if (f->cut || hits(f, &r->drop, ++f->frames)) {
		f->dropped++;
		return true;
	}
	return false;
}

uint8_t fault_on_request(struct emu_qp *qp, uint8_t opcode)
{
	struct fault_qp *f = qp->faults;
	const struct fault_rule *r = f->rule;
	uint32_t flags = wire_opcodes[opcode].flags;

	uint8_t nak = 0;

	if ((flags & OPF_RECV_WQE) && hits(f, &r->rnr, ++f->recv_requests))
		nak = FAULT_NAK_RNR;
	else if ((flags & (HDR_RETH | HDR_ATMETH)) && hits(f, &r->access, ++f->rdma_requests))
		nak = NAK_REMOTE_ACCESS;
	else if (hits(f, &r->remote_op, ++f->requests))
		nak = NAK_REMOTE_OP;
	f->refused += nak != 0;
	return nak;
}
