/* outbuf.c -- bounded rings for unacked output and pending stdin, indexed by stream offset */
#include "outbuf.h"

#include <stdlib.h>
#include <string.h>

/* Rings are indexed by offset & (cap - 1), so growing one re-lays its bytes out but an
 * offset never has to be translated.  A small ring is kept when empty (most commands print
 * little); a large one is freed, so an idle channel costs at most RING_KEEP bytes. */
#define RING_MIN 4096
#define RING_KEEP 4096

static size_t pow2_at_least(size_t n, size_t lo, size_t hi)
{
	size_t c = lo;

	while (c < n && c < hi)
		c *= 2;
	return c < hi ? c : hi;
}

/* A ring's byte limit for a requested window. */
static size_t ring_limit(size_t limit)
{
	return pow2_at_least(limit, RING_MIN, (size_t)1 << 30);
}

/* Make *ring hold at least need (<= limit) bytes, keeping [from, from+held).  0, or -1 when
 * out of memory (the old ring is kept). */
static int ring_fit(uint8_t **ring, size_t *cap, size_t limit, uint64_t from, size_t held,
		    size_t need)
{
	size_t ncap, i;
	uint8_t *nr;

	if (need <= *cap)
		return 0;
	ncap = pow2_at_least(need, RING_MIN, limit);
	if (!(nr = malloc(ncap)))
		return -1;
	for (i = 0; i < held && *ring; i++)
		nr[(from + i) & (ncap - 1)] = (*ring)[(from + i) & (*cap - 1)];
	free(*ring);
	*ring = nr;
	*cap = ncap;
	return 0;
}

static void ring_free(uint8_t **ring, size_t *cap)
{
	free(*ring);
	*ring = NULL;
	*cap = 0;
}

static void ring_copy_out(const uint8_t *ring, size_t cap, uint64_t from, size_t n, uint8_t *out)
{
	size_t at = (size_t)(from & (cap - 1));
	size_t first = n < cap - at ? n : cap - at;

	memcpy(out, ring + at, first);
	memcpy(out + first, ring, n - first);
}

static void ring_copy_in(uint8_t *ring, size_t cap, uint64_t to, const uint8_t *p, size_t n)
{
	size_t at = (size_t)(to & (cap - 1));
	size_t first = n < cap - at ? n : cap - at;

	memcpy(ring + at, p, first);
	memcpy(ring, p + first, n - first);
}

void agent_obuf_init(struct agent_obuf *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = ring_limit(limit);
}

void agent_obuf_free(struct agent_obuf *b)
{
	ring_free(&b->ring, &b->cap);
}

size_t agent_obuf_held(const struct agent_obuf *b)
{
	return (size_t)(b->tail - b->acked);
}

size_t agent_obuf_room(const struct agent_obuf *b, uint8_t stream)
{
	if (b->nruns == AGENT_OUT_RUNS &&
	    b->runs[(b->run_head + b->nruns - 1) % AGENT_OUT_RUNS].stream != stream)
		return 0;
	return b->limit - agent_obuf_held(b);
}

uint8_t *agent_obuf_reserve(struct agent_obuf *b, size_t want, size_t *len)
{
	size_t held = agent_obuf_held(b), at, cont;

	if (want == 0 || held + want > b->limit)
		return NULL;
	if (ring_fit(&b->ring, &b->cap, b->limit, b->acked, held, held + want) < 0)
		return NULL;
	at = (size_t)(b->tail & (b->cap - 1));
	cont = b->cap - at;
	if (cont > b->cap - held)
		cont = b->cap - held;
	*len = cont;
	return b->ring + at;
}

void agent_obuf_commit(struct agent_obuf *b, uint8_t stream, size_t n)
{
	struct agent_run *last;

	if (n == 0)
		return;
	last = b->nruns ? &b->runs[(b->run_head + b->nruns - 1) % AGENT_OUT_RUNS] : NULL;
	if (last && last->stream == stream) {
		last->len += (uint32_t)n;
	} else {
		/* agent_obuf_room() said there was a free run slot. */
		struct agent_run *r = &b->runs[(b->run_head + b->nruns) % AGENT_OUT_RUNS];

		r->len = (uint32_t)n;
		r->stream = stream;
		b->nruns++;
	}
	b->tail += n;
}

size_t agent_obuf_append(struct agent_obuf *b, uint8_t stream, const void *p, size_t n)
{
	size_t done = 0;

	if (n > agent_obuf_room(b, stream))
		n = agent_obuf_room(b, stream);
	while (done < n) {
		size_t len;
		uint8_t *dst = agent_obuf_reserve(b, n - done, &len);

		if (!dst)
			break;
		if (len > n - done)
			len = n - done;
		memcpy(dst, (const uint8_t *)p + done, len);
		agent_obuf_commit(b, stream, len);
		done += len;
	}
	return done;
}

size_t agent_obuf_take(struct agent_obuf *b, size_t max, uint8_t *out, uint8_t *stream,
		       uint64_t *off)
{
	uint64_t pos = b->acked;
	unsigned i;

	if (b->sent >= b->tail || max == 0)
		return 0;
	for (i = 0; i < b->nruns; i++) {
		const struct agent_run *r = &b->runs[(b->run_head + i) % AGENT_OUT_RUNS];

		if (b->sent < pos + r->len) {
			size_t n = (size_t)(pos + r->len - b->sent);

			if (n > max)
				n = max;
			ring_copy_out(b->ring, b->cap, b->sent, n, out);
			*stream = r->stream;
			*off = b->sent;
			b->sent += n;
			return n;
		}
		pos += r->len;
	}
	return 0; /* unreachable while the runs cover [acked, tail) */
}

int agent_obuf_ack(struct agent_obuf *b, uint64_t off)
{
	uint64_t drop;

	if (off > b->tail)
		return -1;
	if (off <= b->acked)
		return 0;
	drop = off - b->acked;
	while (drop > 0 && b->nruns > 0) {
		struct agent_run *r = &b->runs[b->run_head];

		if (r->len <= drop) {
			drop -= r->len;
			b->run_head = (b->run_head + 1) % AGENT_OUT_RUNS;
			b->nruns--;
		} else {
			r->len -= (uint32_t)drop;
			drop = 0;
		}
	}
	b->acked = off;
	if (b->sent < off)
		b->sent = off;
	if (b->acked == b->tail && b->cap > RING_KEEP)
		agent_obuf_free(b);
	return 0;
}

void agent_obuf_rewind(struct agent_obuf *b)
{
	b->sent = b->acked;
}

void agent_ibuf_init(struct agent_ibuf *b, size_t limit)
{
	memset(b, 0, sizeof(*b));
	b->limit = ring_limit(limit);
}

void agent_ibuf_free(struct agent_ibuf *b)
{
	ring_free(&b->ring, &b->cap);
}

size_t agent_ibuf_len(const struct agent_ibuf *b)
{
	return (size_t)(b->received - b->consumed);
}

enum agent_ibuf_rc agent_ibuf_put(struct agent_ibuf *b, uint64_t off, const uint8_t *p, size_t n)
{
	size_t held = agent_ibuf_len(b), skip;

	if (off > b->received)
		return AGENT_IBUF_GAP;
	if (n == 0 || off + n <= b->received)
		return AGENT_IBUF_DUP;
	skip = (size_t)(b->received - off);
	p += skip;
	n -= skip;
	if (held + n > b->limit)
		return AGENT_IBUF_OVERFLOW;
	if (ring_fit(&b->ring, &b->cap, b->limit, b->consumed, held, held + n) < 0)
		return AGENT_IBUF_NOMEM;
	ring_copy_in(b->ring, b->cap, b->received, p, n);
	b->received += n;
	return AGENT_IBUF_OK;
}

const uint8_t *agent_ibuf_peek(const struct agent_ibuf *b, size_t *len)
{
	size_t held = agent_ibuf_len(b), at;

	if (held == 0) {
		*len = 0;
		return NULL;
	}
	at = (size_t)(b->consumed & (b->cap - 1));
	*len = held < b->cap - at ? held : b->cap - at;
	return b->ring + at;
}

void agent_ibuf_consume(struct agent_ibuf *b, size_t n)
{
	if (n > agent_ibuf_len(b))
		n = agent_ibuf_len(b);
	b->consumed += n;
	if (b->consumed == b->received && b->cap > RING_KEEP)
		agent_ibuf_free(b);
}

void agent_ibuf_drop(struct agent_ibuf *b)
{
	b->consumed = b->received;
	if (b->cap > RING_KEEP)
		agent_ibuf_free(b);
}
