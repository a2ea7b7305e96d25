/* SPDX-License-Identifier: MIT */
/*
 * Faults injected on purpose (SOFTRDMA_FAULTS, docs/softrdma-faults.7), so that applications
 * can test their error paths in CI: frames dropped, delayed or cut off after N messages, and
 * RNR, remote access and remote operation NAKs forced on the responder side.
 *
 * The variable is parsed once, when the engine starts. Each QP a rule names carries a
 * struct fault_qp; every other QP carries NULL, and the hooks below cost that one test.
 * Included by emu/internal.h after struct emu_qp.
 */
#ifndef SOFTRDMA_EMU_FAULT_H
#define SOFTRDMA_EMU_FAULT_H

#include <stdbool.h>
#include <stdint.h>

struct emu_qp;
struct fault_qp;

/* Parses SOFTRDMA_FAULTS (once per process): 0, or EINVAL after saying why on stderr. */
int fault_init(void);

/* The faults of a new QP (counted in creation order from 0, and known by its QPN), or NULL. */
struct fault_qp *fault_attach(uint32_t qpn);
void fault_detach(struct fault_qp *f);

/* The parser alone, for the tests: 0, or EINVAL with the reason in why[len]. */
int fault_parse_check(const char *spec, char *why, unsigned int len);

/* Out of line: the decisions, made with the QP's lock held. */
bool fault_on_frame(struct emu_qp *qp, const uint8_t *frame);
uint8_t fault_on_request(struct emu_qp *qp, uint8_t opcode);

/* A responder's verdict forced by fault_request_nak(), beside the NAK codes of emu/wire.h. */
#define FAULT_NAK_RNR	0xff

/*
 * conn_send_frame(): true when the frame (length word and headers) is to be dropped. A
 * delayed frame waits here, in the sending thread; a QP cut off after N messages drops all.
 */
static inline bool fault_drop_frame(struct emu_qp *qp, const uint8_t *frame)
{
	return __builtin_expect(qp && qp->faults != NULL, 0) && fault_on_frame(qp, frame);
}

/*
 * responder_begin(), for a new request in sequence: true when the request is refused on
 * purpose, with *nak the NAK code (emu/wire.h) or FAULT_NAK_RNR.
 */
static inline bool fault_request_nak(struct emu_qp *qp, uint8_t opcode, uint8_t *nak)
{
	if (__builtin_expect(qp->faults == NULL, 1))
		return false;
	*nak = fault_on_request(qp, opcode);
	return *nak != 0;
}

#endif
