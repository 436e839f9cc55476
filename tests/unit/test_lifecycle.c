/* test_lifecycle.c -- the action table against the state machine, and the disk helpers' pure parts */
#include <string.h>

#include "daemon/model/model.h"
#include "daemon/sandbox/runtime.h"
#include "harness.h"

void lifecycle_table_states(enum op_kind kind, unsigned *from, int *transient, int *ok, int *fail);

/* Every path a kind can take is a transition the state machine allows. */
static void test_table_matches_state_machine(void)
{
	for (int k = 0; k < OPK__COUNT; k++) {
		unsigned from;
		int transient, ok, fail;

		lifecycle_table_states((enum op_kind)k, &from, &transient, &ok, &fail);
		for (int s = 0; s < SB__COUNT; s++) {
			int at = transient == SB__COUNT ? s : transient;
			int ok_to = ok == SB__COUNT ? s : ok, fail_to = fail == SB__COUNT ? s : fail;

			if (!(from & (1u << s)))
				continue;
			if (k == OPK_CREATE)
				continue; /* no from-state: a new sandbox starts in creating */
			if (at != s)
				EXPECT(sb_transition_ok((enum sb_state)s, (enum sb_state)at));
			if (ok_to != at)
				EXPECT(sb_transition_ok((enum sb_state)at, (enum sb_state)ok_to));
			if (fail_to != at)
				EXPECT(sb_transition_ok((enum sb_state)at, (enum sb_state)fail_to));
			if (!h_cur)
				continue;
			NOTE("%s from %s via %s", op_kind_name((enum op_kind)k), sb_state_name((enum sb_state)s),
			     sb_state_name((enum sb_state)at));
			return;
		}
	}
}

static void test_table_shape(void)
{
	unsigned from;
	int transient, ok, fail;

	lifecycle_table_states(OPK_PAUSE, &from, &transient, &ok, &fail);
	CHECK(from == (1u << SB_RUNNING) && transient == SB_PAUSING && ok == SB_PAUSED && fail == SB__COUNT,
	      "pause: running -> pausing -> paused, back to running on failure");
	lifecycle_table_states(OPK_SUSPEND, &from, &transient, &ok, &fail);
	CHECK(from == ((1u << SB_RUNNING) | (1u << SB_PAUSED)) && transient == SB_SUSPENDING &&
		      ok == SB_SUSPENDED && fail == SB__COUNT,
	      "suspend: from running or paused; an aborted one returns where it started");
	lifecycle_table_states(OPK_RESTORE, &from, &transient, &ok, &fail);
	CHECK(from == (1u << SB_SUSPENDED) && ok == SB_RUNNING && fail == SB_SUSPENDED,
	      "restore: a failure keeps the saved state");
	lifecycle_table_states(OPK_START, &from, &transient, &ok, &fail);
	CHECK(from == (1u << SB_STOPPED) && transient == SB_CREATING && fail == SB_STOPPED,
	      "start boots a stopped sandbox; a failure leaves it stopped");
	lifecycle_table_states(OPK_FORK, &from, &transient, &ok, &fail);
	CHECK(transient == SB__COUNT && ok == SB__COUNT, "fork leaves the parent where it was");
	lifecycle_table_states(OPK_DELETE, &from, &transient, &ok, &fail);
	CHECK(!(from & (1u << SB_DELETING)) && !(from & (1u << SB_DELETED)) && (from & (1u << SB_SUSPENDED)),
	      "delete: from anything but deleting and deleted");
	for (int k = 0; k < OPK__COUNT; k++)
		EXPECT(op_kind_parse(op_kind_name((enum op_kind)k)) == k);
}

/* A qcow2 header with a backing file name at offset 0x70. */
static void test_qcow2_backing(void)
{
	unsigned char h[512] = { 0x51, 0x46, 0x49, 0xfb, 0, 0, 0, 3 };
	const char *name = "/var/lib/space/disks/dk-0000000000000001.qcow2";
	char out[4096];

	h[8 + 7] = 0x70;
	h[16 + 3] = (unsigned char)strlen(name);
	memcpy(h + 0x70, name, strlen(name));
	CHECK(qcow2_backing_file(h, sizeof(h), out, sizeof(out)) == 0 && !strcmp(out, name),
	      "the backing file name is read from the header");
	h[16 + 3] = 0;
	CHECK(qcow2_backing_file(h, sizeof(h), out, sizeof(out)) == 0 && !out[0], "no backing file: empty");
	h[16 + 3] = 0xff;
	h[16 + 2] = 0xff;
	CHECK(qcow2_backing_file(h, sizeof(h), out, sizeof(out)) < 0, "a name beyond the header is refused");
	h[0] = 'X';
	CHECK(qcow2_backing_file(h, sizeof(h), out, sizeof(out)) < 0, "not a qcow2: refused");
}

int main(void)
{
	RUN(test_table_matches_state_machine);
	RUN(test_table_shape);
	RUN(test_qcow2_backing);
	return DONE();
}
