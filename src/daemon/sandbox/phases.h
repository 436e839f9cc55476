/* phases.h -- when each step of a sandbox's start happened (phases.c) */
#ifndef SPACE_PHASES_H
#define SPACE_PHASES_H

#include <stdint.h>

/* In the order a start goes through them; a step a start skips stays 0. */
enum start_phase {
	PH_BEGIN,    /* the launch was asked for */
	PH_NETNS,    /* its netns (and CA) are there */
	PH_GATEWAY,  /* its gateway was spawned (or taken ready) */
	PH_QEMU,     /* QEMU was spawned */
	PH_READY,    /* QEMU answers: booted far enough, or its snapshot restored */
	PH_HELLO,    /* the guest agent said hello */
	PH_IDENTITY, /* the guest applied its identity (clock, entropy, network, CA) */
	PH_POLICY,   /* the gateway acknowledged its first policy */
	PH_UP,       /* the sandbox is running */
	PH_FIRST,    /* the first output byte of its first command arrived */
	PH_COUNT
};

struct start_phases {
	int64_t at_us[PH_COUNT]; /* monotonic microseconds; 0: not (yet) reached */
};

const char *start_phase_name(enum start_phase p);
/* Starts a new record (PH_BEGIN now, the rest cleared). */
void phases_begin(struct start_phases *ph);
/* Marks p now, once per start (the first mark counts). */
void phases_mark(struct start_phases *ph, enum start_phase p);
/* "netns +4.1, gateway +4.4, ...": each step reached, in ms since PH_BEGIN; at most cap
 * bytes. */
void phases_text(const struct start_phases *ph, char *out, size_t cap);
/* ms from PH_BEGIN to p (-1 if either is not reached). */
double phases_ms(const struct start_phases *ph, enum start_phase p);

#endif
