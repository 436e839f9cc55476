/* outbuf.h -- per-channel byte accounting: unacked output (with stream tags) and pending stdin.
 * Pure data structures with no I/O, so the unit tests can drive them directly. */
#ifndef SPACE_AGENT_OUTBUF_H
#define SPACE_AGENT_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Output of one channel, as offsets into its combined stdout+stderr sequence:
 *
 *     acked <= sent <= tail
 *
 * [acked, tail) is held in a ring of at most `limit` bytes: [acked, sent) was sent and may
 * have to be sent again after a host reconnect, [sent, tail) was read from the pipes and not
 * sent yet.  Each byte's stream is kept as runs of (stream, length); the number of runs is
 * bounded too, so a process alternating one-byte writes to stdout and stderr cannot make the
 * agent allocate without bound: when the run table is full, a read of the other stream waits.
 */
#define AGENT_OUT_RUNS 256

struct agent_run {
	uint32_t len;
	uint8_t stream;
};

struct agent_obuf {
	uint64_t acked, sent, tail;
	size_t limit;       /* most bytes held: PROTO_OUT_WINDOW */
	uint8_t *ring;      /* allocated lazily, grown up to limit, freed when empty */
	size_t cap;         /* bytes allocated in ring (power of two or limit) */
	struct agent_run runs[AGENT_OUT_RUNS]; /* ring of runs covering [acked, tail) */
	unsigned run_head, nruns;
};

void agent_obuf_init(struct agent_obuf *b, size_t limit);
void agent_obuf_free(struct agent_obuf *b);
/* Bytes held: tail - acked. */
size_t agent_obuf_held(const struct agent_obuf *b);
/* How many bytes of `stream` may be appended now (0 if the window or run table is full). */
size_t agent_obuf_room(const struct agent_obuf *b, uint8_t stream);
/* Make at least `want` (<= room) contiguous bytes writable at the tail; returns a pointer to
 * them and sets *len to the contiguous length available (>= 1), or NULL on allocation failure.
 * The caller fills some of them (e.g. with read()) and then calls agent_obuf_commit(). */
uint8_t *agent_obuf_reserve(struct agent_obuf *b, size_t want, size_t *len);
void agent_obuf_commit(struct agent_obuf *b, uint8_t stream, size_t n);
/* Convenience for tests: reserve + memcpy + commit; returns bytes appended. */
size_t agent_obuf_append(struct agent_obuf *b, uint8_t stream, const void *p, size_t n);
/* The next unsent piece: one stream, at most max bytes; copies it into out and returns its
 * length (0 if nothing unsent), *stream and *off describe it.  Advances `sent`. */
size_t agent_obuf_take(struct agent_obuf *b, size_t max, uint8_t *out, uint8_t *stream,
		       uint64_t *off);
/* Host holds [0, off).  Returns 0, or -1 if off is beyond tail (bogus; ignored).  An offset
 * at or below `acked` is a stale ack and changes nothing.  An ack beyond `sent` (the host got
 * bytes before a reconnect that we are about to resend) moves `sent` forward too. */
int agent_obuf_ack(struct agent_obuf *b, uint64_t off);
/* Resend everything unacked: sent = acked. */
void agent_obuf_rewind(struct agent_obuf *b);

/*
 * Pending stdin of one channel: bytes received from the host and not yet written to the
 * process's pipe, [consumed, received).  The host may have at most `limit` bytes in flight
 * beyond the last A_STDIN_ACK, so the ring never holds more than that.
 */
struct agent_ibuf {
	uint64_t consumed, received;
	size_t limit;
	uint8_t *ring;
	size_t cap;
};

enum agent_ibuf_rc {
	AGENT_IBUF_OK = 0,       /* appended (possibly after dropping a duplicate prefix) */
	AGENT_IBUF_DUP = 1,      /* all bytes already received: dropped */
	AGENT_IBUF_GAP = -1,     /* offset beyond what was received: protocol error */
	AGENT_IBUF_OVERFLOW = -2,/* more than the window: protocol error */
	AGENT_IBUF_NOMEM = -3,
};

void agent_ibuf_init(struct agent_ibuf *b, size_t limit);
void agent_ibuf_free(struct agent_ibuf *b);
size_t agent_ibuf_len(const struct agent_ibuf *b);
enum agent_ibuf_rc agent_ibuf_put(struct agent_ibuf *b, uint64_t off, const uint8_t *p, size_t n);
/* Contiguous pending bytes at the head (for write()); *len = 0 when empty. */
const uint8_t *agent_ibuf_peek(const struct agent_ibuf *b, size_t *len);
void agent_ibuf_consume(struct agent_ibuf *b, size_t n);
/* Drop everything pending (process gone or stdin closed): consumed = received. */
void agent_ibuf_drop(struct agent_ibuf *b);

#endif
