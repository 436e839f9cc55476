/* flow.h -- the arithmetic of output and stdin flow control between spaced and a guest agent.
 * Pure functions (no I/O, no state of their own) so that the rules a hostile guest meets are
 * stated once and unit-tested (tests/unit/test_flow.c). docs/design/guest-bounds.md explains
 * them. */
#ifndef SPACE_FLOW_H
#define SPACE_FLOW_H

#include <stdbool.h>
#include <stdint.h>

/* The offset the daemon may acknowledge now: what it holds (`have`), but no further than
 * `lag` bytes past `floor` (the slowest attached reader, or the furthest any reader got). */
static inline uint64_t flow_ack_target(uint64_t have, uint64_t floor, uint64_t lag)
{
	if (floor > UINT64_MAX - lag)
		return have;
	return have < floor + lag ? have : floor + lag;
}

/* May the agent hold output up to `end` (exclusive) when the daemon's furthest ACK ever sent
 * on any connection is `acked`? The agent may run `window` bytes ahead of the ACK it got, and
 * it never got more than the daemon sent: a reconnect does not move `acked` back, so a guest
 * that reconnects (or repeats A_HELLO) gains no room. */
static inline bool flow_window_ok(uint64_t acked, uint64_t end, uint64_t window)
{
	return end <= acked || end - acked <= window;
}

/* After a reconnect the agent reports `received`, the stdin bytes it got. The daemon had sent
 * [acked, sent) without an acknowledgement. Returns how many of those bytes to resend (the
 * tail [received, sent)); a report outside [acked, sent] is a lie or a restarted daemon and
 * resends nothing. */
static inline uint64_t flow_stdin_resend(uint64_t acked, uint64_t sent, uint64_t received)
{
	if (received < acked || received > sent)
		return 0;
	return sent - received;
}

/* A running session the agent's A_HELLO does not list. The agent keeps a channel from its
 * H_EXEC until the daemon's H_RELEASE (sent only after A_EXIT, which follows A_STARTED), so a
 * start this daemon process sent and saw no A_STARTED for never reached the agent: it was lost
 * with the connection (a reconnect frees what was still queued). That one is sent again. A
 * session loaded from the database after a restart cannot tell: its A_STARTED may have come
 * and the row not been written, then the process ran, exited and was released; running it
 * twice would be worse than saying it was lost. */
static inline bool flow_start_resend(bool sent_by_this_process, int pid)
{
	return sent_by_this_process && pid <= 0;
}

#endif
