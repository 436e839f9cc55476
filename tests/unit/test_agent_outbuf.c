/* test_agent_outbuf.c -- the agent's output window (stream runs, acks, rewind) and stdin buffer */
#include <string.h>

#include "agent/outbuf.h"
#include "harness.h"

#define LIMIT (256 * 1024)

static void basic_take_ack(void)
{
	struct agent_obuf b;
	uint8_t out[64];
	uint8_t st;
	uint64_t off;

	agent_obuf_init(&b, LIMIT);
	EXPECT_EQ(agent_obuf_room(&b, 1), LIMIT);
	EXPECT_EQ(agent_obuf_append(&b, 1, "hello", 5), 5);
	EXPECT_EQ(agent_obuf_append(&b, 1, " world", 6), 6); /* same stream: one run */
	EXPECT_EQ(b.nruns, 1);
	EXPECT_EQ(agent_obuf_append(&b, 2, "ERR", 3), 3);
	EXPECT_EQ(b.nruns, 2);
	EXPECT_EQ(agent_obuf_held(&b), 14);

	/* A take never crosses a stream boundary. */
	EXPECT_EQ(agent_obuf_take(&b, sizeof(out), out, &st, &off), 11);
	EXPECT(memcmp(out, "hello world", 11) == 0);
	EXPECT_EQ(st, 1);
	EXPECT_EQ(off, 0);
	EXPECT_EQ(agent_obuf_take(&b, 2, out, &st, &off), 2);
	EXPECT_EQ(st, 2);
	EXPECT_EQ(off, 11);
	EXPECT_EQ(agent_obuf_take(&b, sizeof(out), out, &st, &off), 1);
	EXPECT_EQ(off, 13);
	EXPECT_EQ(agent_obuf_take(&b, sizeof(out), out, &st, &off), 0);

	/* Acks free the prefix; stale acks are harmless; acks beyond the tail are refused. */
	EXPECT_EQ(agent_obuf_ack(&b, 6), 0);
	EXPECT_EQ(agent_obuf_held(&b), 8);
	EXPECT_EQ(agent_obuf_ack(&b, 3), 0);
	EXPECT_EQ(b.acked, 6);
	EXPECT_EQ(agent_obuf_ack(&b, 15), -1);
	EXPECT_EQ(b.acked, 6);

	/* Rewind: resend from the ack, with the right streams. */
	agent_obuf_rewind(&b);
	EXPECT_EQ(agent_obuf_take(&b, sizeof(out), out, &st, &off), 5);
	EXPECT(memcmp(out, "world", 5) == 0);
	EXPECT_EQ(off, 6);
	EXPECT_EQ(st, 1);
	EXPECT_EQ(agent_obuf_take(&b, sizeof(out), out, &st, &off), 3);
	EXPECT(memcmp(out, "ERR", 3) == 0);
	EXPECT_EQ(agent_obuf_ack(&b, 14), 0);
	EXPECT_EQ(agent_obuf_held(&b), 0);
	EXPECT_EQ(b.nruns, 0);
	agent_obuf_free(&b);
}

static void ack_beyond_sent(void)
{
	struct agent_obuf b;
	uint8_t out[16];
	uint8_t st;
	uint64_t off;

	/* After a reconnect the host may ack bytes the agent is about to resend. */
	agent_obuf_init(&b, LIMIT);
	agent_obuf_append(&b, 1, "abcdefgh", 8);
	EXPECT_EQ(agent_obuf_take(&b, 8, out, &st, &off), 8);
	agent_obuf_rewind(&b);
	EXPECT_EQ(b.sent, 0);
	EXPECT_EQ(agent_obuf_ack(&b, 5), 0);
	EXPECT_EQ(b.sent, 5);
	EXPECT_EQ(agent_obuf_take(&b, 16, out, &st, &off), 3);
	EXPECT_EQ(off, 5);
	EXPECT(memcmp(out, "fgh", 3) == 0);
	agent_obuf_free(&b);
}

static void window_limit(void)
{
	static uint8_t chunk[100000], out[70000];
	struct agent_obuf b;
	uint8_t st;
	uint64_t off;
	size_t n;

	agent_obuf_init(&b, LIMIT);
	EXPECT_EQ(agent_obuf_append(&b, 1, chunk, sizeof(chunk)), sizeof(chunk));
	EXPECT_EQ(agent_obuf_append(&b, 1, chunk, sizeof(chunk)), sizeof(chunk));
	n = agent_obuf_append(&b, 1, chunk, sizeof(chunk));
	EXPECT_EQ(n, LIMIT - 200000);
	EXPECT_EQ(agent_obuf_room(&b, 1), 0);
	EXPECT_EQ(agent_obuf_room(&b, 2), 0);
	EXPECT(b.cap <= LIMIT);
	/* Sending alone frees nothing: only an ack does. */
	while (agent_obuf_take(&b, sizeof(out), out, &st, &off))
		;
	EXPECT_EQ(agent_obuf_room(&b, 1), 0);
	agent_obuf_ack(&b, 70000);
	EXPECT_EQ(agent_obuf_room(&b, 1), 70000);
	agent_obuf_ack(&b, LIMIT);
	EXPECT(b.ring == NULL); /* an emptied large ring is given back */
	agent_obuf_free(&b);
}

static void run_table_bounded(void)
{
	struct agent_obuf b;
	unsigned i;

	agent_obuf_init(&b, LIMIT);
	for (i = 0; i < AGENT_OUT_RUNS; i++)
		EXPECT_EQ(agent_obuf_append(&b, (uint8_t)(1 + i % 2), "x", 1), 1);
	EXPECT_EQ(b.nruns, AGENT_OUT_RUNS);
	/* Table full: the last run's stream may grow, the other must wait for an ack. */
	EXPECT_EQ(agent_obuf_room(&b, 1), 0);
	EXPECT(agent_obuf_room(&b, 2) > 0);
	EXPECT_EQ(agent_obuf_append(&b, 2, "yy", 2), 2);
	agent_obuf_ack(&b, 1);
	EXPECT(agent_obuf_room(&b, 1) > 0);
	agent_obuf_free(&b);
}

/* Random appends, takes, acks and rewinds against a flat model of the whole stream. */
static void randomized_model(void)
{
	static uint8_t model[4 << 20], mstream[4 << 20], tmp[70000];
	struct agent_obuf b;
	unsigned seed = 7;
	uint64_t total = 0, acked = 0, sent = 0;
	int i, bad = 0;

	agent_obuf_init(&b, LIMIT);
	for (i = 0; i < 200000 && total < sizeof(model) - 70000; i++) {
		int op = rand_r(&seed) % 10;

		if (op < 4) {
			uint8_t s = (uint8_t)(1 + rand_r(&seed) % 2);
			size_t n = (size_t)(rand_r(&seed) % 5000), j, got;

			for (j = 0; j < n; j++)
				tmp[j] = (uint8_t)rand_r(&seed);
			got = agent_obuf_append(&b, s, tmp, n);
			EXPECT(got <= n);
			memcpy(model + total, tmp, got);
			memset(mstream + total, s, got);
			total += got;
		} else if (op < 8) {
			uint8_t st = 0;
			uint64_t off = 0;
			size_t n = agent_obuf_take(&b, (size_t)(1 + rand_r(&seed) % 65000), tmp, &st, &off);

			if (n) {
				if (off != sent || memcmp(tmp, model + off, n) != 0 ||
				    memchr(mstream + off, st == 1 ? 2 : 1, n))
					bad++;
				sent = off + n;
			}
		} else if (op == 8) {
			uint64_t to = acked + (uint64_t)rand_r(&seed) % (sent - acked + 1);

			EXPECT_EQ(agent_obuf_ack(&b, to), 0);
			acked = to;
		} else {
			agent_obuf_rewind(&b);
			sent = acked;
		}
		if (b.tail != total || b.acked != acked || b.sent != sent)
			bad++;
	}
	EXPECT_EQ(bad, 0);
	EXPECT(total > 1000000);
	agent_obuf_free(&b);
}

static void ibuf_rules(void)
{
	struct agent_ibuf b;
	const uint8_t *p;
	size_t len;

	agent_ibuf_init(&b, 8192);
	EXPECT_EQ(agent_ibuf_put(&b, 0, (const uint8_t *)"hello", 5), AGENT_IBUF_OK);
	EXPECT_EQ(agent_ibuf_put(&b, 0, (const uint8_t *)"hello", 5), AGENT_IBUF_DUP);
	EXPECT_EQ(agent_ibuf_put(&b, 3, (const uint8_t *)"lo!!", 4), AGENT_IBUF_OK);
	EXPECT_EQ(b.received, 7);
	EXPECT_EQ(agent_ibuf_put(&b, 9, (const uint8_t *)"x", 1), AGENT_IBUF_GAP);
	EXPECT_EQ(agent_ibuf_put(&b, 7, (const uint8_t *)"", 0), AGENT_IBUF_DUP);
	p = agent_ibuf_peek(&b, &len);
	EXPECT_EQ(len, 7);
	EXPECT(memcmp(p, "hello!!", 7) == 0);
	agent_ibuf_consume(&b, 2);
	EXPECT_EQ(b.consumed, 2);
	EXPECT_EQ(agent_ibuf_len(&b), 5);
	agent_ibuf_drop(&b);
	EXPECT_EQ(b.consumed, 7);
	EXPECT_EQ(agent_ibuf_len(&b), 0);
	p = agent_ibuf_peek(&b, &len);
	EXPECT_EQ(len, 0);
	agent_ibuf_free(&b);
}

static void ibuf_window_and_wrap(void)
{
	static uint8_t data[1 << 20], got[1 << 20];
	struct agent_ibuf b;
	size_t in = 0, outn = 0, i;
	unsigned seed = 3;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 31 + 7);
	agent_ibuf_init(&b, 8192);
	EXPECT_EQ(agent_ibuf_put(&b, 0, data, 8193), AGENT_IBUF_OVERFLOW);
	while (outn < sizeof(data)) {
		size_t room = 8192 - agent_ibuf_len(&b), n = (size_t)(rand_r(&seed) % 3000);

		if (n > room)
			n = room;
		if (n > sizeof(data) - in)
			n = sizeof(data) - in;
		if (n) {
			EXPECT_EQ(agent_ibuf_put(&b, in, data + in, n), AGENT_IBUF_OK);
			in += n;
		}
		{
			size_t len, take;
			const uint8_t *p = agent_ibuf_peek(&b, &len);

			take = len ? (size_t)(rand_r(&seed) % len) + 1 : 0;
			if (take) {
				memcpy(got + outn, p, take);
				agent_ibuf_consume(&b, take);
				outn += take;
			}
		}
		EXPECT(agent_ibuf_len(&b) <= 8192);
	}
	EXPECT(memcmp(got, data, sizeof(data)) == 0);
	agent_ibuf_free(&b);
}

int main(void)
{
	RUN(basic_take_ack);
	RUN(ack_beyond_sent);
	RUN(window_limit);
	RUN(run_table_bounded);
	RUN(randomized_model);
	RUN(ibuf_rules);
	RUN(ibuf_window_and_wrap);
	return harness_done();
}
