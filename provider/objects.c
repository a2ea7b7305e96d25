// SPDX-License-Identifier: MIT
/*
 * The objects of a context, as the kernel's uverbs keeps them (drivers/infiniband/core/
 * rdma_core.c and uverbs_std_types*.c): a table of handles per context, in which every verb
 * that names an object looks it up, and use counts that make a destroy with dependents EBUSY.
 *
 * - A handle that names nothing is ENOENT, one that names an object of another type EINVAL
 *   (lookup_get_idr_uobject() and rdma_lookup_get_uobject()). One that names another object of
 *   the same type is EINVAL too: the kernel would act on that other object, which a provider
 *   that compares the pointer as well need not do.
 * - A creation names its parents (a QP: its PD, CQs and SRQ) and becomes a user of each; a
 *   destroy is EBUSY while the object has users, and while another verb is running on it
 *   (uverbs_try_lock_object(): destroy takes the object exclusively, a verb shares it).
 * - Counts per type are kept for the whole process, which is one device (one engine), as rxe
 *   keeps its pools per device; a creation beyond the limit query_device advertises is ENOMEM.
 *   MRs, windows and SRQs are counted by the engine (emu/mr.c, emu/srq.c), the rest here.
 *
 * Only what the handle names is trusted: the application's object is read for its handle,
 * and the provider's object is used only once the table says it is the one that handle names.
 */
#include <errno.h>
#include <stdlib.h>

#include "softrdma.h"

#define FIRST_SLOTS	64

/* The most objects of each type a process may hold; 0: counted by the engine. */
static const uint32_t device_limit[SR_OBJ_TYPES] = {
	[SR_OBJ_PD] = EMU_MAX_PD,
	[SR_OBJ_XRCD] = EMU_MAX_XRCD,
	[SR_OBJ_CQ] = EMU_MAX_CQ,
	[SR_OBJ_AH] = EMU_MAX_AH,
	[SR_OBJ_QP] = EMU_MAX_QP,
};
static _Atomic uint32_t device_count[SR_OBJ_TYPES];

/* Every type at its limit at once: no context needs more handles than this. */
#define MAX_HANDLES	((uint32_t)EMU_MAX_PD + EMU_MAX_XRCD + EMU_MAX_CQ + EMU_MAX_AH +	\
			 EMU_MAX_MR + EMU_MAX_MW + EMU_MAX_SRQ + EMU_MAX_QP)

int sr_objects_init(struct sr_obj_table *t)
{
	t->slots = NULL;
	t->free_handles = NULL;
	t->nslots = 0;
	t->nfree = 0;
	return pthread_mutex_init(&t->lock, NULL);
}

void sr_objects_fini(struct sr_obj_table *t)
{
	free(t->slots);
	free(t->free_handles);
	pthread_mutex_destroy(&t->lock);
}

static bool count_take(enum sr_obj_type type)
{
	uint32_t max = device_limit[type];

	if (!max)
		return true;
	if (atomic_fetch_add(&device_count[type], 1) < max)
		return true;
	atomic_fetch_sub(&device_count[type], 1);
	return false;
}

static void count_give(enum sr_obj_type type)
{
	if (device_limit[type])
		atomic_fetch_sub(&device_count[type], 1);
}

/* Called with t->lock held: one more slot on the free stack, growing the table if needed. */
static int reserve_handle(struct sr_obj_table *t, uint32_t *handle)
{
	uint32_t grown_n, *grown_free;
	struct sr_obj **grown;

	if (!t->nfree) {
		if (t->nslots >= MAX_HANDLES)
			return ENOMEM;
		grown_n = t->nslots ? t->nslots * 2 : FIRST_SLOTS;
		if (grown_n > MAX_HANDLES)
			grown_n = MAX_HANDLES;
		grown = reallocarray(t->slots, grown_n, sizeof(*grown));
		if (!grown)
			return ENOMEM;
		t->slots = grown;
		grown_free = reallocarray(t->free_handles, grown_n, sizeof(*grown_free));
		if (!grown_free)
			return ENOMEM;	/* the larger slot array is kept: harmless */
		t->free_handles = grown_free;
		/* Lowest handles on top, so a fresh context hands out 0, 1, 2... as uverbs does. */
		for (uint32_t h = grown_n; h > t->nslots; h--) {
			t->slots[h - 1] = NULL;
			t->free_handles[t->nfree++] = h - 1;
		}
		t->nslots = grown_n;
	}
	*handle = t->free_handles[--t->nfree];
	return 0;
}

/* Called with t->lock held: is ref the live object its handle names? */
static int lookup(struct sr_obj_table *t, struct sr_obj_ref ref)
{
	struct sr_obj *o;

	if (ref.handle >= t->nslots || !(o = t->slots[ref.handle]))
		return ENOENT;
	if (o->type != ref.type || o != ref.obj)
		return EINVAL;
	return 0;
}

int sr_obj_create(struct sr_context *ctx, struct sr_obj *o, enum sr_obj_type type,
		  const struct sr_obj_ref *parents, int nparents)
{
	struct sr_obj_table *t = &ctx->objects;
	int ret = 0;

	o->type = type;
	o->users = 0;
	o->calls = 0;
	o->nparents = 0;
	o->next_kept = NULL;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < nparents && !ret; i++) {
		ret = lookup(t, parents[i]);
		/* A parent being destroyed is as good as gone. */
		if (!ret && parents[i].obj->calls < 0)
			ret = ENOENT;
	}
	if (!ret && !count_take(type))
		ret = ENOMEM;
	if (!ret) {
		ret = reserve_handle(t, &o->handle);
		if (ret)
			count_give(type);
	}
	if (!ret)
		for (int i = 0; i < nparents; i++) {
			parents[i].obj->users++;
			o->parents[o->nparents++] = parents[i].obj;
		}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void sr_obj_publish(struct sr_context *ctx, struct sr_obj *o)
{
	pthread_mutex_lock(&ctx->objects.lock);
	ctx->objects.slots[o->handle] = o;
	pthread_mutex_unlock(&ctx->objects.lock);
}

void sr_obj_unmake(struct sr_context *ctx, struct sr_obj *o)
{
	struct sr_obj_table *t = &ctx->objects;

	pthread_mutex_lock(&t->lock);
	t->slots[o->handle] = NULL;
	t->free_handles[t->nfree++] = o->handle;
	for (int i = 0; i < o->nparents; i++)
		o->parents[i]->users--;
	o->nparents = 0;
	count_give(o->type);
	pthread_mutex_unlock(&t->lock);
}

void *sr_obj_create_failed(struct sr_context *ctx, struct sr_obj *o, void *mem, int err)
{
	if (o)
		sr_obj_unmake(ctx, o);
	free(mem);
	errno = err;
	return NULL;
}

int sr_obj_enter(struct sr_context *ctx, struct sr_obj_ref ref)
{
	struct sr_obj_table *t = &ctx->objects;
	int ret;

	pthread_mutex_lock(&t->lock);
	ret = lookup(t, ref);
	if (!ret && ref.obj->calls < 0)
		ret = EBUSY;	/* being destroyed */
	if (!ret)
		ref.obj->calls++;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void sr_obj_leave(struct sr_context *ctx, struct sr_obj *o)
{
	pthread_mutex_lock(&ctx->objects.lock);
	o->calls--;
	pthread_mutex_unlock(&ctx->objects.lock);
}

int sr_obj_destroy_begin(struct sr_context *ctx, struct sr_obj_ref ref)
{
	struct sr_obj_table *t = &ctx->objects;
	int ret;

	pthread_mutex_lock(&t->lock);
	ret = lookup(t, ref);
	if (!ret && (ref.obj->users || ref.obj->calls))
		ret = EBUSY;
	if (!ret)
		ref.obj->calls = -1;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void sr_obj_destroy_cancel(struct sr_context *ctx, struct sr_obj *o)
{
	pthread_mutex_lock(&ctx->objects.lock);
	o->calls = 0;
	pthread_mutex_unlock(&ctx->objects.lock);
}

bool sr_obj_teardown_refused(struct sr_context *ctx, struct sr_obj *o, int err)
{
	if (!err || ctx->closing)
		return false;
	sr_obj_destroy_cancel(ctx, o);
	return true;
}

int sr_obj_teardown_free(struct sr_context *ctx, struct sr_obj *o, void *mem, int err)
{
	if (sr_obj_teardown_refused(ctx, o, err))
		return err;
	sr_obj_unmake(ctx, o);
	free(mem);
	return 0;
}

int sr_obj_swap_parent(struct sr_context *ctx, struct sr_obj *o, struct sr_obj *old,
		       struct sr_obj_ref parent)
{
	struct sr_obj_table *t = &ctx->objects;
	int ret;

	pthread_mutex_lock(&t->lock);
	ret = lookup(t, parent);
	if (!ret && parent.obj->calls < 0)
		ret = ENOENT;
	for (int i = 0; !ret && i < o->nparents; i++)
		if (o->parents[i] == old) {
			old->users--;
			parent.obj->users++;
			o->parents[i] = parent.obj;
			break;
		}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* The memory a kept object lives in: only QPs and SRQs are kept. */
static void *kept_memory(struct sr_obj *o)
{
	if (o->type == SR_OBJ_QP)
		return sr_container_of(o, struct sr_qp, obj);
	return sr_container_of(o, struct sr_srq, obj);
}

void sr_obj_keep_or_free(struct sr_context *ctx, struct sr_obj *o, bool keep,
			 pthread_mutex_t *mutex, pthread_cond_t *cond)
{
	if (keep) {
		pthread_mutex_lock(&ctx->objects.lock);
		o->next_kept = ctx->kept;
		ctx->kept = o;
		pthread_mutex_unlock(&ctx->objects.lock);
		return;
	}
	pthread_cond_destroy(cond);
	pthread_mutex_destroy(mutex);
	free(kept_memory(o));
}

void sr_kept_free(struct sr_context *ctx)
{
	while (ctx->kept) {
		struct sr_obj *o = ctx->kept;

		ctx->kept = o->next_kept;
		free(kept_memory(o));
	}
}

/* Each type's teardown: what its destroy verb does once the object is taken. */
static int teardown(struct sr_context *ctx, struct sr_obj *o)
{
	switch (o->type) {
	case SR_OBJ_PD: return sr_pd_teardown(ctx, sr_container_of(o, struct sr_pd, obj));
	case SR_OBJ_XRCD: return sr_xrcd_teardown(ctx, sr_container_of(o, struct sr_xrcd, obj));
	case SR_OBJ_CQ: return sr_cq_teardown(ctx, sr_container_of(o, struct sr_cq, obj));
	case SR_OBJ_AH: return sr_ah_teardown(ctx, sr_container_of(o, struct sr_ah, obj));
	case SR_OBJ_MR: return sr_mr_teardown(ctx, sr_container_of(o, struct sr_mr, obj));
	case SR_OBJ_MW: return sr_mw_teardown(ctx, sr_container_of(o, struct sr_mw, obj));
	case SR_OBJ_SRQ: return sr_srq_teardown(ctx, sr_container_of(o, struct sr_srq, obj));
	case SR_OBJ_QP: return sr_qp_teardown(ctx, sr_container_of(o, struct sr_qp, obj));
	case SR_OBJ_TYPES: break;
	}
	return EINVAL;
}

int sr_obj_destroy(struct sr_context *ctx, struct sr_obj_ref ref)
{
	int ret = sr_obj_destroy_begin(ctx, ref);

	return ret ? ret : teardown(ctx, ref.obj);
}

/*
 * What ibv_close_device finds still there is destroyed, as the kernel's close of the
 * context's file destroys it (RDMA_REMOVE_CLOSE): children first, and nobody waits for
 * event acknowledgements. One pass over the table per type.
 */
void sr_objects_release(struct sr_context *ctx)
{
	struct sr_obj_table *t = &ctx->objects;

	ctx->closing = true;
	for (int type = SR_OBJ_TYPES - 1; type >= 0; type--)
		for (uint32_t h = 0;; h++) {
			struct sr_obj *o = NULL;
			bool end;

			pthread_mutex_lock(&t->lock);
			end = h >= t->nslots;
			if (!end && t->slots[h] && t->slots[h]->type == (enum sr_obj_type)type) {
				o = t->slots[h];
				o->calls = -1;	/* a verb still running on it is the application's bug */
			}
			pthread_mutex_unlock(&t->lock);
			if (end)
				break;
			if (o)
				teardown(ctx, o);
		}
	sr_kept_free(ctx);
}
