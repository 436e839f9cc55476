/* test_model.c -- state names, the sandbox state machine, ids and time formatting */
#include <string.h>

#include "daemon/model/model.h"
#include "harness.h"

#define C SB_CREATING
#define R SB_RUNNING
#define PG SB_PAUSING
#define P SB_PAUSED
#define SG SB_SUSPENDING
#define S SB_SUSPENDED
#define RS SB_RESTORING
#define TG SB_STOPPING
#define T SB_STOPPED
#define DG SB_DELETING
#define D SB_DELETED
#define F SB_FAILED
#define L SB_LOST

/* The whole table, written out independently of model.c: allowed[from][to]. */
static const char allowed[SB__COUNT][SB__COUNT] = {
	/*          C  R  PG P  SG S  RS TG T  DG D  F  L */
	[C]  = {   0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0 },
	[R]  = {   0, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0 },
	[PG] = {   0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0 },
	[P]  = {   0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 0, 1, 0 },
	[SG] = {   0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0 },
	[S]  = {   0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0 },
	[RS] = {   0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0 },
	[TG] = {   0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0 },
	[T]  = {   1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0 },
	[DG] = {   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0 },
	[D]  = {   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	[F]  = {   0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0 },
	/* lost: only delete leaves it */
	[L]  = {   0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0 },
};

static void test_names(void)
{
	bool all = true;

	for (int i = 0; i < SB__COUNT; i++)
		all &= sb_state_parse(sb_state_name((enum sb_state)i)) == i;
	CHECK(all, "every sandbox state name parses back");
	CHECK(!strcmp(sb_state_name(SB_SUSPENDED), "suspended"), "suspended is named suspended");
	CHECK(sb_state_parse("Running") == -1 && sb_state_parse("") == -1 &&
		      sb_state_parse(NULL) == -1,
	      "unknown sandbox state names are -1");
	CHECK(!strcmp(sb_state_name(SB__COUNT), "unknown"), "out-of-range state is 'unknown'");

	all = true;
	for (int i = 0; i < OP__COUNT; i++)
		all &= op_state_parse(op_state_name((enum op_state)i)) == i;
	CHECK(all, "every operation state name parses back");
	CHECK(!strcmp(op_state_name(OP_SUCCEEDED), "succeeded"), "op succeeded name");
	CHECK(op_state_done(OP_SUCCEEDED) && op_state_done(OP_FAILED) &&
		      !op_state_done(OP_PENDING) && !op_state_done(OP_RUNNING),
	      "op_state_done: succeeded and failed only");

	all = true;
	for (int i = 0; i < SESS__COUNT; i++)
		all &= sess_state_parse(sess_state_name((enum sess_state)i)) == i;
	CHECK(all, "every session state name parses back");
	CHECK(sess_state_parse("exited") == SESS_EXITED && sess_state_parse("x") == -1,
	      "session state parse");
}

static void test_machine(void)
{
	int bad = 0;

	for (int f = 0; f < SB__COUNT; f++)
		for (int t = 0; t < SB__COUNT; t++)
			if (sb_transition_ok((enum sb_state)f, (enum sb_state)t) != allowed[f][t]) {
				NOTE("%s -> %s: got %d", sb_state_name((enum sb_state)f),
				     sb_state_name((enum sb_state)t), !allowed[f][t]);
				bad++;
			}
	CHECK(bad == 0, "transition table matches (%d mismatches)", bad);

	bad = 0;
	for (int f = 0; f < SB__COUNT; f++)
		bad += f != SB_DELETED && f != SB_DELETING &&
		       !sb_transition_ok((enum sb_state)f, SB_DELETING);
	CHECK(bad == 0, "delete starts from every state but deleting and deleted");
	bad = 0;
	for (int t = 0; t < SB__COUNT; t++)
		bad += sb_transition_ok(SB_DELETED, (enum sb_state)t);
	CHECK(bad == 0, "deleted is terminal");
	bad = 0;
	for (int s = 0; s < SB__COUNT; s++)
		bad += sb_transition_ok((enum sb_state)s, (enum sb_state)s);
	CHECK(bad == 0, "no state transitions to itself");
	CHECK(sb_transition_ok(SB_FAILED, SB_DELETING) && !sb_transition_ok(SB_FAILED, SB_RUNNING),
	      "failed leads only to deleting");
	bad = 0;
	for (int s = 0; s < SB__COUNT; s++)
		if (sb_state_has_vm((enum sb_state)s))
			bad += !sb_transition_ok((enum sb_state)s, SB_FAILED);
	CHECK(bad == 0, "every state with a VM can fail");
	CHECK(!sb_transition_ok(SB__COUNT, SB_RUNNING) && !sb_transition_ok(SB_RUNNING, SB__COUNT),
	      "out-of-range states are refused");

	CHECK(sb_state_has_vm(SB_RUNNING) && sb_state_has_vm(SB_PAUSED) &&
		      sb_state_has_vm(SB_CREATING) && sb_state_has_vm(SB_RESTORING) &&
		      sb_state_has_vm(SB_DELETING),
	      "running, paused, creating, restoring, deleting have a VM");
	CHECK(!sb_state_has_vm(SB_SUSPENDED) && !sb_state_has_vm(SB_STOPPED) &&
		      !sb_state_has_vm(SB_DELETED) && !sb_state_has_vm(SB_FAILED),
	      "suspended, stopped, deleted, failed have none");
}

static void test_ids(void)
{
	char a[ID_LEN], b[ID_LEN];

	id_new(a, "sb-");
	id_new(b, "sb-");
	CHECK(strlen(a) == 19 && !strncmp(a, "sb-", 3), "id_new: sb- + 16 chars (%s)", a);
	CHECK(id_valid(a, "sb-"), "a new id is valid");
	CHECK(strcmp(a, b) != 0, "two new ids differ");
	CHECK(!id_valid(a, "op-"), "an sb- id is not an op- id");
	id_new(a, "ss-");
	CHECK(id_valid(a, "ss-"), "ss- ids too");

	CHECK(id_valid("op-0123456789abcdef", "op-"), "lowercase hex is valid");
	CHECK(!id_valid("op-0123456789ABCDEF", "op-"), "uppercase hex is not");
	CHECK(!id_valid("op-0123456789abcde", "op-"), "15 hex chars are not");
	CHECK(!id_valid("op-0123456789abcdef0", "op-"), "17 hex chars are not");
	CHECK(!id_valid("op-0123456789abcdeg", "op-"), "a non-hex char is not");
	CHECK(!id_valid("0123456789abcdef", "op-"), "missing prefix is not");
	CHECK(!id_valid("xop-0123456789abcdef", "op-"), "leading junk is not");
	CHECK(!id_valid("op-0123456789abcde/", "op-"), "a slash is not");
	CHECK(!id_valid("", "op-") && !id_valid(NULL, "op-") && !id_valid("op-", "op-"),
	      "empty, NULL and bare prefix are not");
}

static void test_time(void)
{
	char buf[32];
	int64_t a, b;

	fmt_time(buf, 0);
	CHECK(!strcmp(buf, "1970-01-01T00:00:00.000Z"), "epoch: %s", buf);
	fmt_time(buf, 1796017107123LL);
	CHECK(!strcmp(buf, "2026-11-30T05:38:27.123Z"), "the reference example: %s", buf);
	fmt_time(buf, 1796017107005LL);
	CHECK(!strcmp(buf, "2026-11-30T05:38:27.005Z"), "milliseconds are zero-padded: %s", buf);
	fmt_time(buf, -1);
	CHECK(!strcmp(buf, "1969-12-31T23:59:59.999Z"), "before the epoch floors: %s", buf);
	fmt_time(buf, 951782400000LL); /* leap day 2000 */
	CHECK(!strcmp(buf, "2000-02-29T00:00:00.000Z"), "leap day: %s", buf);

	a = now_ms();
	b = now_ms();
	CHECK(a > 1700000000000LL && b >= a, "now_ms is wall-clock milliseconds");
}

int main(void)
{
	test_names();
	test_machine();
	test_ids();
	test_time();
	return DONE();
}
