/* test_flow.c -- the bounds a guest meets, as pure arithmetic: the output ACK target and window
 * (src/daemon/sandbox/flow.h), the stdin resend after a reconnect, and the log-line token
 * bucket (src/common/log.c). */
#include <stdint.h>

#include "daemon/sandbox/flow.h"
#include "harness.h"
#include "log.h"

#define MiB (1ull << 20)

static void test_ack_target(void)
{
	/* Below the lag bound: everything held is acknowledged. */
	EXPECT_EQ(flow_ack_target(100, 0, 8 * MiB), 100);
	/* No reader got anything: at most the lag. */
	EXPECT_EQ(flow_ack_target(20 * MiB, 0, 8 * MiB), 8 * MiB);
	/* A reader at 5 MiB lets it run to 13 MiB. */
	EXPECT_EQ(flow_ack_target(20 * MiB, 5 * MiB, 8 * MiB), 13 * MiB);
	/* No attached reader (floor UINT64_MAX): no overflow, all of it. */
	EXPECT_EQ(flow_ack_target(20 * MiB, UINT64_MAX, 8 * MiB), 20 * MiB);
	EXPECT_EQ(flow_ack_target(UINT64_MAX, UINT64_MAX - 1, 8 * MiB), UINT64_MAX);
}

static void test_window(void)
{
	const uint64_t w = 256 * 1024;

	EXPECT(flow_window_ok(0, w, w));
	EXPECT(!flow_window_ok(0, w + 1, w));
	EXPECT(flow_window_ok(8 * MiB, 8 * MiB + w, w));
	EXPECT(!flow_window_ok(8 * MiB, 8 * MiB + w + 1, w));
	/* Output below the ACK (a resend) always fits. */
	EXPECT(flow_window_ok(8 * MiB, 10, w));
	/* Offsets near the top do not wrap into "fits". */
	EXPECT(!flow_window_ok(0, UINT64_MAX, w));
	EXPECT(flow_window_ok(UINT64_MAX - 5, UINT64_MAX, w));
}

static void test_stdin_resend(void)
{
	/* Sent [100, 300) unacknowledged; the agent got up to 250: resend 50. */
	EXPECT_EQ(flow_stdin_resend(100, 300, 250), 50);
	EXPECT_EQ(flow_stdin_resend(100, 300, 300), 0);
	EXPECT_EQ(flow_stdin_resend(100, 300, 100), 200);
	/* Reports outside what was sent: nothing to resend. */
	EXPECT_EQ(flow_stdin_resend(100, 300, 99), 0);
	EXPECT_EQ(flow_stdin_resend(100, 300, 301), 0);
	EXPECT_EQ(flow_stdin_resend(0, 0, UINT64_MAX), 0);
}

static void test_start_resend(void)
{
	/* Sent by this process, no A_STARTED seen: it never reached the agent. */
	EXPECT(flow_start_resend(true, 0));
	EXPECT(flow_start_resend(true, -1));
	/* It started: the agent not knowing it means it is gone. */
	EXPECT(!flow_start_resend(true, 42));
	/* Loaded from the database after a restart: never run twice. */
	EXPECT(!flow_start_resend(false, 0));
	EXPECT(!flow_start_resend(false, 42));
}

static void test_log_limit(void)
{
	struct log_limit l = { 0 };
	uint64_t k = 99;
	int allowed = 0;

	/* A full bucket of 5, then nothing within the same millisecond. */
	for (int i = 0; i < 100; i++)
		allowed += log_limit_take(&l, 1000, 2, 5, &k);
	EXPECT_EQ(allowed, 5);
	EXPECT_EQ(l.suppressed, 95);
	/* 2 a second: 499 ms later still none, at 500 ms one, and it reports the 96 refused. */
	EXPECT(!log_limit_take(&l, 1499, 2, 5, &k));
	EXPECT(log_limit_take(&l, 1500, 2, 5, &k));
	EXPECT_EQ(k, 96);
	EXPECT(!log_limit_take(&l, 1500, 2, 5, &k));
	/* A long quiet spell refills to the burst, no more (and no overflow). */
	allowed = 0;
	for (int i = 0; i < 50; i++)
		allowed += log_limit_take(&l, INT64_MAX / 2, 2, 5, &k);
	EXPECT_EQ(allowed, 5);
	/* A clock going back restarts with a full bucket rather than stalling. */
	EXPECT(log_limit_take(&l, 10, 2, 5, &k));
	/* Over a simulated minute at one attempt per millisecond: the burst plus 2 a second. */
	{
		struct log_limit m = { 0 };

		allowed = 0;
		for (int64_t t = 0; t < 60000; t++)
			allowed += log_limit_take(&m, t, 2, 5, &k);
		EXPECT(allowed >= 5 + 119 && allowed <= 5 + 120);
	}
}

int main(void)
{
	RUN(test_ack_target);
	RUN(test_window);
	RUN(test_stdin_resend);
	RUN(test_start_resend);
	RUN(test_log_limit);
	return DONE();
}
