/*
 * share: see share.h. The arithmetic is in floats per coordinate, as the
 * model's; the buffers grow once to the model's size (an attached process
 * announces it after the daemon starts) and to the largest share.
 */
#include "share.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gossip_wire.h"
#include "mask.h"
#include "topk.h"
#include "trust.h"
#include "util.h"
#include "wire.h"

static const char *const share_type_names[] = { "SHARE" };

const struct proto share_proto = {
	"share", SHARE_T_SHARE, SHARE_T_SHARE, share_type_names,
};

static const char *const share_refusal_names[SHARE_REFUSE_N] = {
	[SHARE_REFUSE_MALFORMED] = "malformed",
	[SHARE_REFUSE_SIZE] = "size",
	[SHARE_REFUSE_NONFINITE] = "nonfinite",
	[SHARE_REFUSE_SUSPECT] = "suspect",
	[SHARE_REFUSE_UNANCHORED] = "unanchored",
};

struct share {
	float *anchor, *resid, *x;    /* d floats each, once anchored */
	size_t d;
	int anchored;
	struct topk *topk;
	size_t *idx;                  /* the last round's coordinates */
	float *vals;                  /* and their values as sent */
	size_t cap;                   /* of idx and vals */
	struct mask piece;            /* one message's coordinates */
	uint8_t *out;                 /* the last round's messages, back to back */
	size_t out_cap;
	size_t *ends;                 /* where each ends in out */
	size_t nmsg, ends_cap;
	gossip_tamper_fn tamper;      /* test builds only */
	void *tamper_arg;
	float *fx;                    /* the model as tampered, d floats */
	struct mask all;              /* [0, d), for the tamper */
	struct mask rmask;            /* a received share's coordinates */
	float *rvals;
	size_t rcap;
	double own_rms;               /* of this peer's latest share; 0: none yet */
	double lr;                    /* every share goes in times this */
	double n_power;               /* and at 1/n to this power (share_set_weight) */
	double decay;                 /* the residual's after a round (share_set_decay) */
	struct model_range *whole;    /* coordinates every round sends (share_set_whole) */
	size_t nwhole, whole_d;       /* ranges, and the coordinates in them */
	size_t whole_for;             /* the d they were set for */
	int judged;                   /* no more judging (share_trained) */
	uint64_t rounds, sent, send_failed, received, applied, clipped;
	uint64_t refused[SHARE_REFUSE_N];
};

int
share_new(struct share **out)
{
	*out = xcalloc(1, sizeof(**out));
	(*out)->topk = xmalloc(sizeof(*(*out)->topk));
	(*out)->lr = 1;
	(*out)->n_power = 1;
	(*out)->decay = 1;
	return 0;
}

void
share_free(struct share *s)
{
	if (s == NULL)
		return;
	free(s->anchor);
	free(s->resid);
	free(s->x);
	free(s->fx);
	mask_free(&s->all);
	free(s->topk);
	free(s->idx);
	free(s->vals);
	mask_free(&s->piece);
	free(s->out);
	free(s->ends);
	mask_free(&s->rmask);
	free(s->rvals);
	free(s->whole);
	free(s);
}

void
share_reset(struct share *s)
{
	if (s == NULL)
		return;
	s->anchored = 0;
	s->own_rms = 0;
}

static double
share_rms(const float *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (double)v[i] * v[i];
	return n > 0 ? sqrt(sum / (double)n) : 0;
}

/* The radius a share from a member is clipped to (< 0: none): trust's
 * factor times the larger of the members' median and this peer's own
 * latest share. Without a quorum, the first shares of a zeroed member
 * would come before any radius and go in whole; and near the end of a
 * decaying schedule the median falls with the shares of the members that
 * finished first, while a member a few steps behind still sends many
 * times theirs, as this peer does (a churn run: honest members suspected
 * in their last second of training). */
static double
share_radius(const struct share *s, const struct trust *trust, double now)
{
	double radius, own;

	if (trust == NULL)
		return -1;
	radius = trust_radius(trust, now);
	own = trust_factor(trust) * s->own_rms;
	return own > 0 && own > radius ? own : radius;
}

int
share_anchor(struct share *s, struct model *m)
{
	struct model_range all = { 0, m->d };
	int rc;

	if ((s->anchored && s->d == m->d) || m->d == 0)
		return 0;
	if (m->d > s->d) {
		s->anchor = xrealloc(s->anchor, m->d, sizeof(float));
		s->resid = xrealloc(s->resid, m->d, sizeof(float));
		s->x = xrealloc(s->x, m->d, sizeof(float));
	}
	s->d = m->d;
	s->anchored = 0;
	if ((rc = model_gather(m, &all, 1, s->anchor)) < 0)
		return rc;
	if (!gossip_finite(s->anchor, s->d))
		return -EDOM;
	memset(s->resid, 0, s->d * sizeof(float));
	s->anchored = 1;
	return 0;
}

int
share_job_model(const struct share *s, float *out, size_t d)
{
	if (!s->anchored || s->d != d)
		return -ENOENT;
	if (out != NULL)
		memcpy(out, s->anchor, d * sizeof(float));
	return 0;
}

/* The coordinates from *at on up to the next of the nw whole ranges, or
 * that range (*whole set); 0 past the end. */
static size_t
share_run(const struct share *s, size_t nw, size_t *at, size_t *r, int *whole)
{
	size_t lo = *at, hi = s->d;

	if (*r < nw && lo == s->whole[*r].off) {
		hi = lo + s->whole[(*r)++].len;
		*whole = 1;
	} else {
		if (*r < nw)
			hi = s->whole[*r].off;
		*whole = 0;
	}
	*at = hi;
	return hi - lo;
}

/* The whole ranges' coordinates, and the top density of |e| over the rest,
 * into idx, sorted, with e's values in vals. */
static size_t
share_select(struct share *s, double density)
{
	size_t nw = s->whole_for == s->d ? s->nwhole : 0, wd = nw > 0 ? s->whole_d : 0;
	size_t rest = s->d - wd, k = 0, n = 0, at, r, len;
	double want = round(density * (double)rest);
	int whole;

	if (rest > 0)
		k = want < 1 ? 1 : want > (double)rest ? rest : (size_t)want;
	if (k + wd > s->cap) {
		s->cap = k + wd;
		s->idx = xrealloc(s->idx, s->cap, sizeof(*s->idx));
		s->vals = xrealloc(s->vals, s->cap, sizeof(*s->vals));
	}
	topk_begin(s->topk);
	for (at = 0, r = 0; (len = share_run(s, nw, &at, &r, &whole)) > 0;)
		for (size_t i = at - len; i < at && !whole; i++)
			topk_count(s->topk, s->resid[i]);
	topk_threshold(s->topk, k);
	for (at = 0, r = 0; (len = share_run(s, nw, &at, &r, &whole)) > 0;) {
		for (size_t i = at - len; i < at; i++) {
			if (whole || (!topk_full(s->topk) && topk_take(s->topk, s->resid[i]))) {
				s->idx[n] = i;
				s->vals[n++] = s->resid[i];
			}
		}
	}
	topk_end(s->topk);
	return n;
}

/* n as the header carries it: a share weighs 1 / this everywhere. */
static size_t
share_wire_n(size_t n)
{
	return n < UINT16_MAX ? n : UINT16_MAX;
}

/* Message i holds coordinates [lo, hi) of the selection; its values are
 * rounded as the members will read them, so that this peer applies what
 * they apply. */
static int
share_encode(struct share *s, const struct share_params *p, size_t n, size_t lo, size_t hi)
{
	size_t count = hi - lo, max, ilen, rlen, at;
	unsigned k;
	uint8_t *buf;
	int rc;

	mask_clear(&s->piece);
	for (size_t i = lo; i < hi; i++)
		if ((rc = mask_add(&s->piece, s->idx[i])) < 0)
			return rc;
	max = SHARE_HEADER + mask_wire_max(count) + gossip_values_bytes(p->values, count);
	at = s->nmsg > 0 ? s->ends[s->nmsg - 1] : 0;
	if (at + max > s->out_cap) {
		s->out_cap = 2 * (at + max);
		s->out = xrealloc(s->out, s->out_cap, 1);
	}
	if (s->nmsg == s->ends_cap) {
		s->ends_cap = 2 * s->ends_cap + 4;
		s->ends = xrealloc(s->ends, s->ends_cap, sizeof(*s->ends));
	}
	buf = s->out + at;
	memset(buf, 0, SHARE_HEADER);
	buf[0] = SHARE_WIRE_VERSION;
	buf[1] = (uint8_t)p->values;
	wire_put_u16(buf + 2, (uint16_t)share_wire_n(n));
	wire_put_u64(buf + 8, s->d);
	wire_put_u64(buf + 16, count);
	ilen = mask_encode(&s->piece, buf + SHARE_HEADER);
	k = mask_rice_best(&s->piece, &rlen);
	if (rlen < ilen) {
		buf[4] = (uint8_t)(k + 1);
		ilen = mask_encode_rice(&s->piece, k, buf + SHARE_HEADER);
	}
	wire_put_u64(buf + 24, ilen);
	gossip_values_put(buf + SHARE_HEADER + ilen, s->vals + lo, count, p->values);
	gossip_values_get(s->vals + lo, buf + SHARE_HEADER + ilen, count, p->values);
	s->ends[s->nmsg++] = at + SHARE_HEADER + ilen + gossip_values_bytes(p->values, count);
	return 0;
}

/* At most SHARE_GROWTH times the previous share's RMS (share.h). */
static void
share_cap(struct share *s, size_t k)
{
	double rms = share_rms(s->vals, k), most = SHARE_GROWTH * s->own_rms;

	if (s->own_rms <= 0 || rms <= most)
		return;
	for (size_t i = 0; i < k; i++)
		s->vals[i] = (float)(s->vals[i] * (most / rms));
}

int
share_set_whole(struct share *s, const struct model_range *r, size_t n, size_t d,
    struct errbuf *err)
{
	size_t end = 0, total = 0;

	for (size_t i = 0; i < n; i++) {
		if (r[i].len == 0 || r[i].off < end || r[i].off > d || r[i].len > d - r[i].off)
			return errbuf_set(err, -EINVAL, "range %zu [%zu, +%zu) is empty, overlaps "
			    "or precedes the last, or ends past %zu", i, r[i].off, r[i].len, d);
		end = r[i].off + r[i].len;
		total += r[i].len;
	}
	s->whole = xrealloc(s->whole, n > 0 ? n : 1, sizeof(*s->whole));
	if (n > 0)
		memcpy(s->whole, r, n * sizeof(*r));
	s->nwhole = n;
	s->whole_d = total;
	s->whole_for = d;
	return 0;
}

void
share_set_weight(struct share *s, double lr, int adaptive)
{
	s->lr = lr;
	s->n_power = adaptive ? 0.5 : 1;
}

void
share_set_decay(struct share *s, double decay)
{
	s->decay = decay;
}

/* What a share counting n members goes in times (share.h). */
static double
share_weight(const struct share *s, double n)
{
	return s->lr / pow(n, s->n_power);
}

void
share_trained(struct share *s)
{
	s->judged = 1;
}

void
share_set_tamper(struct share *s, gossip_tamper_fn fn, void *arg)
{
	s->tamper = fn;
	s->tamper_arg = arg;
}

/* The model as the round reads it: s->x, or with a fault set its faulty
 * copy (no consensus distance or origin here: the kinds that need them
 * send the values as they are). */
static int
share_tampered(struct share *s, const float **read)
{
	int rc;

	*read = s->x;
	if (s->tamper == NULL)
		return 0;
	s->fx = xrealloc(s->fx, s->d, sizeof(float));
	if ((rc = mask_dense(&s->all, s->d)) < 0)
		return rc;
	memcpy(s->fx, s->x, s->d * sizeof(float));
	s->tamper(s->tamper_arg, &s->all, s->fx, s->d, -1, NULL);
	*read = s->fx;
	return 0;
}

int
share_round(struct share *s, struct model *m, const struct share_params *p, size_t n,
    size_t *count)
{
	struct model_range all = { 0, m->d };
	size_t k, piece = p->piece > 0 ? p->piece : 1;
	double w = share_weight(s, (double)share_wire_n(n));
	const float *read;
	int rc;

	*count = 0;
	s->nmsg = 0;
	if (!s->anchored || s->d != m->d)
		return share_anchor(s, m);
	if ((rc = model_gather(m, &all, 1, s->x)) < 0)
		return rc;
	if (!gossip_finite(s->x, s->d))
		return -EDOM;
	if ((rc = share_tampered(s, &read)) < 0)
		return rc;
	for (size_t i = 0; i < s->d; i++)
		s->resid[i] += read[i] - s->anchor[i];
	k = share_select(s, p->density);
	share_cap(s, k);
	for (size_t lo = 0; lo < k && rc == 0; lo += piece)
		rc = share_encode(s, p, n, lo, lo + piece < k ? lo + piece : k);
	/* As the exchange, a peer never sends values that are not finite:
	 * fp16 turns what exceeds its range into infinities. */
	if (rc == 0 && !gossip_finite(s->vals, k))
		rc = -EDOM;
	if (rc < 0) {
		/* nothing sent: the move stays in the model for the next */
		for (size_t i = 0; i < s->d; i++)
			s->resid[i] -= read[i] - s->anchor[i];
		s->nmsg = 0;
		return rc;
	}
	s->own_rms = share_rms(s->vals, k);
	for (size_t i = 0; i < k; i++) {
		s->resid[s->idx[i]] -= s->vals[i];
		s->anchor[s->idx[i]] += (float)(s->vals[i] * w);
	}
	if (s->decay < 1)
		for (size_t i = 0; i < s->d; i++)
			s->resid[i] = (float)(s->resid[i] * s->decay);
	/* x becomes the increment that takes the model to the anchor. */
	for (size_t i = 0; i < s->d; i++)
		s->x[i] = s->anchor[i] - s->x[i];
	if ((rc = model_add_in(m, &all, 1, s->x)) < 0)
		return rc;
	s->rounds++;
	*count = s->nmsg;
	return 0;
}

const uint8_t *
share_message(const struct share *s, size_t i, size_t *len)
{
	size_t at = i > 0 ? s->ends[i - 1] : 0;

	*len = s->ends[i] - at;
	return s->out + at;
}

/* Decodes buf into rmask and rvals, and the sender's n into *n: every
 * length checked against the bytes received before anything is read. */
static int
share_decode(struct share *s, const uint8_t *buf, size_t len, size_t d, size_t *n,
    enum share_refusal *why, struct errbuf *err)
{
	enum gossip_values fmt;
	uint64_t md, count, ilen;

	*why = SHARE_REFUSE_MALFORMED;
	if (len < SHARE_HEADER || buf[0] != SHARE_WIRE_VERSION)
		return errbuf_set(err, -EBADMSG, "short or of an unknown version");
	if (buf[1] >= GOSSIP_VALUES_N)
		return errbuf_set(err, -EBADMSG, "unknown value format %u", buf[1]);
	if ((*n = wire_get_u16(buf + 2)) == 0)
		return errbuf_set(err, -EBADMSG, "a job of no members");
	fmt = (enum gossip_values)buf[1];
	md = wire_get_u64(buf + 8);
	count = wire_get_u64(buf + 16);
	ilen = wire_get_u64(buf + 24);
	if (md != d) {
		*why = SHARE_REFUSE_SIZE;
		return errbuf_set(err, -EBADMSG, "a model of %llu parameters, ours has %zu",
		    (unsigned long long)md, d);
	}
	if (count == 0 || count > d || ilen > len - SHARE_HEADER ||
	    gossip_values_bytes(fmt, count) != len - SHARE_HEADER - ilen)
		return errbuf_set(err, -EBADMSG, "lengths do not add up");
	if ((buf[4] == 0 ? mask_decode(&s->rmask, buf + SHARE_HEADER, ilen, count, d) :
	    mask_decode_rice(&s->rmask, buf[4] - 1u, buf + SHARE_HEADER, ilen, count, d)) < 0)
		return errbuf_set(err, -EBADMSG, "bad indices");
	if (count > s->rcap) {
		s->rvals = xrealloc(s->rvals, count, sizeof(float));
		s->rcap = count;
	}
	gossip_values_get(s->rvals, buf + SHARE_HEADER + ilen, count, fmt);
	if (!gossip_finite(s->rvals, count)) {
		*why = SHARE_REFUSE_NONFINITE;
		return errbuf_set(err, -EBADMSG, "values that are not finite");
	}
	return 0;
}

int
share_recv(struct share *s, struct model *m, struct trust *trust, const char *addr,
    double now, size_t n, const uint8_t *buf, size_t len, enum share_refusal *why,
    struct errbuf *err)
{
	double rms, radius, w;
	size_t count, at = 0, sn = 0;
	int rc;

	s->received++;
	if ((rc = share_decode(s, buf, len, m->d, &sn, why, err)) < 0)
		goto refused;
	count = s->rmask.count;
	if (!s->anchored || s->d != m->d) {
		*why = SHARE_REFUSE_UNANCHORED;
		rc = errbuf_set(err, -EAGAIN, "no anchor yet");
		goto refused;
	}
	rms = share_rms(s->rvals, count);
	radius = share_radius(s, trust, now);
	if (trust != NULL && (s->judged ? trust_suspect(trust, addr) : trust_observe(trust, addr,
	    now, &(struct trust_slice){ .rms = rms, .radius = radius }))) {
		*why = SHARE_REFUSE_SUSPECT;
		rc = errbuf_set(err, -EPERM, "its sender is suspect");
		goto refused;
	}
	w = share_weight(s, fmax((double)sn, (double)n / SHARE_N_SLACK));
	if (radius > 0 && rms > radius) {
		w *= radius / rms;
		s->clipped++;
	}
	for (size_t r = 0; r < s->rmask.n; r++) {
		for (size_t i = 0; i < s->rmask.r[r].len; i++, at++) {
			s->rvals[at] = (float)(w * s->rvals[at]);
			s->anchor[s->rmask.r[r].off + i] += s->rvals[at];
		}
	}
	if ((rc = model_add_in(m, s->rmask.r, s->rmask.n, s->rvals)) < 0)
		return rc;
	s->applied++;
	return 0;
refused:
	s->refused[*why]++;
	return rc;
}

void
share_sent(struct share *s, int status)
{
	if (status == 0)
		s->sent++;
	else
		s->send_failed++;
}

int
share_stats_json(const struct share *s, json_t *obj)
{
	json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "rounds", (json_int_t)s->rounds,
	    "sent", (json_int_t)s->sent, "send_failed", (json_int_t)s->send_failed,
	    "received", (json_int_t)s->received, "applied", (json_int_t)s->applied,
	    "clipped", (json_int_t)s->clipped);
	json_t *r = json_object();

	if (j == NULL || r == NULL)
		goto fail;
	for (int i = 0; i < SHARE_REFUSE_N; i++)
		if (json_object_set_new(r, share_refusal_names[i],
		    json_integer((json_int_t)s->refused[i])) < 0)
			goto fail;
	if (json_object_set_new(j, "refused", r) < 0) {
		r = NULL;
		goto fail;
	}
	return json_object_set_new(obj, "share", j) == 0 ? 0 : -ENOMEM;
fail:
	json_decref(j);
	json_decref(r);
	return -ENOMEM;
}
