/* binding.c -- a secret's hosts (binding.h): parsed with the policy's own entry grammar (an
 * allow list of names and wildcards), and the inclusion of an inject rule's host in them. */
#include "egress/binding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Is name (a normalised name) suffix, or below it? */
static bool below(const char *name, const char *suffix, bool or_equal)
{
	size_t n = strlen(name), s = strlen(suffix);

	if (n == s)
		return or_equal && strcmp(name, suffix) == 0;
	return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, suffix) == 0;
}

static bool entry_covers(const struct egress_entry *b, const struct egress_entry *h)
{
	if (b->kind == EGRESS_NAME)
		return h->kind == EGRESS_NAME && strcmp(b->name, h->name) == 0;
	if (b->kind != EGRESS_WILDCARD)
		return false;
	/* "*.x" covers a.x and *.a.x, and *.x itself; never x (a wildcard needs one more label) */
	if (h->kind == EGRESS_NAME)
		return below(h->name, b->name, false);
	return h->kind == EGRESS_WILDCARD && below(h->name, b->name, true);
}

/* The binding's patterns through the policy parser: {"allow": hosts}. */
static int parse_as_allow(const json_t *hosts, struct egress_policy **p, space_err *err)
{
	json_t *j = json_pack("{s:O}", "allow", hosts);
	int rc;

	if (!j)
		return err_set(err, ENOMEM, "out of memory");
	rc = egress_policy_parse(j, false, p, err);
	json_decref(j);
	return rc;
}

int egress_binding_parse(const json_t *hosts, json_t **out, space_err *err)
{
	struct egress_policy *p = NULL;
	json_t *norm;

	*out = NULL;
	if (!json_is_array(hosts) || json_array_size(hosts) == 0 || json_array_size(hosts) > EGRESS_BINDING_MAX)
		return err_set(err, EINVAL,
			       "hosts is required: 1 to %d names or *.suffix patterns this secret may be sent to",
			       EGRESS_BINDING_MAX);
	for (size_t i = 0; i < json_array_size(hosts); i++)
		if (!json_is_string(json_array_get(hosts, i)))
			return err_set(err, EINVAL, "hosts[%zu]: not a string (a name or *.suffix)", i);
	if (parse_as_allow(hosts, &p, err) < 0) {
		/* "allow[1]: ..." reads as "hosts[1]: ..." */
		if (!strncmp(err->msg, "allow", 5)) {
			char m[sizeof(err->msg)];
			snprintf(m, sizeof(m), "hosts%s", err->msg + 5);
			snprintf(err->msg, sizeof(err->msg), "%s", m);
		}
		return -1;
	}
	norm = json_array();
	for (int i = 0; norm && i < p->nallow; i++) {
		const struct egress_entry *e = &p->allow[i];
		bool dup = false;
		size_t k;
		json_t *v;

		if ((e->kind != EGRESS_NAME && e->kind != EGRESS_WILDCARD) || e->port) {
			err_set(err, EINVAL, "hosts[%d]: \"%.300s\" must be a name or *.suffix, without a port", i, e->text);
			egress_policy_free(p);
			json_decref(norm);
			return -1;
		}
		json_array_foreach(norm, k, v)
			dup |= strcmp(json_string_value(v), e->text) == 0;
		if (!dup && json_array_append_new(norm, json_string(e->text)) < 0) {
			json_decref(norm);
			norm = NULL;
		}
	}
	egress_policy_free(p);
	if (!norm)
		return err_set(err, ENOMEM, "out of memory");
	*out = norm;
	return 0;
}

bool egress_binding_covers(const json_t *binding, const struct egress_entry *host)
{
	struct egress_policy *p = NULL;
	space_err err = { 0 };
	bool ok = false;

	if (!json_is_array(binding) || json_array_size(binding) == 0 || parse_as_allow(binding, &p, &err) < 0)
		return false;
	for (int i = 0; i < p->nallow && !ok; i++)
		ok = entry_covers(&p->allow[i], host);
	egress_policy_free(p);
	return ok;
}

int egress_binding_check(const json_t *network, const char *secret, const json_t *binding, space_err *err)
{
	struct egress_policy *p = NULL;
	int rc = 0;

	if (egress_policy_parse(network, false, &p, err) < 0)
		return -1;
	for (int i = 0; i < p->ninject && rc == 0; i++) {
		const struct egress_inject *r = &p->inject[i];
		char *bound;

		if (strcmp(r->secret, secret) != 0 || egress_binding_covers(binding, &r->host))
			continue;
		bound = json_array_size(binding) ? json_dumps(binding, JSON_COMPACT) : NULL;
		rc = err_set(err, EINVAL, "inject[%d]: secret %s may not be sent to %s; it is bound to %s", i, secret,
			     r->host.text, bound ? bound : "no host (PUT it again with \"hosts\")");
		free(bound);
	}
	egress_policy_free(p);
	return rc;
}
