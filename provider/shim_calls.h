/* SPDX-License-Identifier: MIT */
/*
 * What the provider offers the drop-in librdmacm beyond the verbs. The shim finds it with
 * dlsym() in the library that implements the context's own ops, so with any other provider
 * the call is simply absent. Each call names the context it is for: only that context's
 * provider is asked.
 */
#ifndef SOFTRDMA_SHIM_CALLS_H
#define SOFTRDMA_SHIM_CALLS_H

#include <stdint.h>
#include <infiniband/verbs.h>

/*
 * The peer's CM said it disconnected: take in what the peer of QP qp_num sent before that,
 * before the application hears of it (emu_qp_take_arrived()).
 */
#define SOFTRDMA_TAKE_ARRIVED_SYMBOL "softrdma_qp_take_arrived"
typedef void softrdma_take_arrived_fn(struct ibv_context *context, uint32_t qp_num);

#endif
