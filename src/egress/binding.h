/* binding.h -- the hosts a secret may be sent to (PUT /v1/secrets/{name} "hosts"): parsing the
 * list, and whether an inject rule's host stays inside it, so that no policy can send a secret
 * anywhere its owner did not name (docs/design/egress.md "Secrets"). Pure logic, no I/O. */
#ifndef SPACE_EGRESS_BINDING_H
#define SPACE_EGRESS_BINDING_H

#include <jansson.h>
#include <stdbool.h>

#include "egress/policy.h"
#include "err.h"

#define EGRESS_BINDING_MAX 32

/* hosts: a JSON array of 1..EGRESS_BINDING_MAX names ("api.example.com") or wildcards
 * ("*.example.org": any name below example.org), no ports or addresses. *out: a new array of
 * their normalised forms (lower case, duplicates dropped). -1 with err naming the entry. */
int egress_binding_parse(const json_t *hosts, json_t **out, space_err *err);

/* Is every name the inject rule's host can match (a name, or a *.suffix) inside one of the
 * binding's patterns (a JSON array as egress_binding_parse makes)? An empty or unreadable
 * binding covers nothing. */
bool egress_binding_covers(const json_t *binding, const struct egress_entry *host);

/* The inject rules of a policy (JSON, as clients send it) that name `secret`, checked against
 * its binding: 0, or -1 with err ("inject[2]: secret stripe may not be sent to api.evil.com;
 * it is bound to api.stripe.com"). */
int egress_binding_check(const json_t *network, const char *secret, const json_t *binding, space_err *err);

#endif
